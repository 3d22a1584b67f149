package runtimechain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// TestStandardOrder pins the chain in force, outer → inner
// (docs/architecture.md §3.2). Adding a step changes this list on purpose.
func TestStandardOrder(t *testing.T) {
	var got []string
	for _, s := range Standard(Deps{}).Steps() {
		got = append(got, s.Name())
		if s.Description() == "" || strings.Contains(s.Description(), "\n") {
			t.Errorf("step %s: description must be one non-empty line, got %q", s.Name(), s.Description())
		}
	}
	want := "output_budget refusal_audit result_sanitisation assembly input_budget decode_arguments map_arguments authorization read_before_write error_normalisation tool_lookup skill_policy deferred_filter dispatch"
	if strings.Join(got, " ") != want {
		t.Fatalf("chain order:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

type traceStep struct {
	name  string
	trace *[]string
	stop  bool
}

func (s traceStep) Name() string        { return s.name }
func (s traceStep) Description() string { return "trace" }
func (s traceStep) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	*s.trace = append(*s.trace, "in:"+s.name)
	if s.stop {
		return &Outcome{Text: "answered by " + s.name}, nil
	}
	o, err := next(ctx, c)
	*s.trace = append(*s.trace, "out:"+s.name)
	return o, err
}

func TestChainRunsOuterToInnerAndStopsAtAnAnswer(t *testing.T) {
	var trace []string
	c, err := New(traceStep{name: "a", trace: &trace}, traceStep{name: "b", trace: &trace, stop: true}, traceStep{name: "c", trace: &trace})
	if err != nil {
		t.Fatal(err)
	}
	o := c.Run(context.Background(), &Call{Name: "x"})
	if o.Text != "answered by b" || strings.Join(trace, " ") != "in:a in:b out:a" {
		t.Fatalf("outcome %q, trace %v", o.Text, trace)
	}
	if _, err := New(traceStep{name: "a", trace: &trace}, traceStep{name: "a", trace: &trace}); err == nil {
		t.Fatal("a step listed twice was accepted")
	}
	if _, err := New(traceStep{trace: &trace}); err == nil {
		t.Fatal("a step without a name was accepted")
	}
	// Nobody answers: the call still gets a RUNTIME result, never a nil.
	c, _ = New(traceStep{name: "only", trace: &trace})
	if o := c.Run(context.Background(), &Call{Name: "x"}); o.Kind != runtimev1.ErrorKind_ERROR_KIND_RUNTIME {
		t.Fatalf("unanswered call: %+v", o)
	}
}

// fakes for the standard chain

type fakeViews struct {
	view *runtimeassembly.View
	err  error
}

func (f fakeViews) Build(context.Context, *runtimestore.Thread) (*runtimeassembly.Base, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.view.Base, nil
}
func (f fakeViews) View(context.Context, *runtimestore.Thread, *runtimeassembly.Base) *runtimeassembly.View {
	return f.view
}

type fakeAuthz struct {
	allow map[string]bool
	err   error
	asked []string
}

func (f *fakeAuthz) Authorize(_ context.Context, in *authzv1.AuthorizeRequest, _ ...grpc.CallOption) (*authzv1.AuthorizeResponse, error) {
	f.asked = append(f.asked, in.GetTarget())
	if f.err != nil {
		return nil, f.err
	}
	d := &authzv1.Decision{Allow: f.allow[in.GetTarget()]}
	if !d.Allow {
		d.Reasons = []*authzv1.Reason{{Code: "authz.denied", Message: "viewers may not call " + in.GetTarget()}}
	}
	return &authzv1.AuthorizeResponse{Decision: d}, nil
}

type fakeTools struct {
	called []string
	err    error
}

func (f *fakeTools) CallTool(_ context.Context, c *Call) (*Outcome, error) {
	f.called = append(f.called, c.Name)
	if f.err != nil {
		return nil, f.err
	}
	return &Outcome{Text: "ran " + c.Name}, nil
}

type fakeWS struct{ digest string }

func (f fakeWS) WritablePath(p string) (string, bool) {
	return p, strings.HasPrefix(p, "/mnt/user-data/workspace/")
}
func (f fakeWS) Lock(context.Context, string) (func(), error) { return func() {}, nil }
func (f fakeWS) CurrentDigest(string, string) (string, error) {
	return f.digest, nil
}

func testView() *runtimeassembly.View {
	mcp := &runtimeassembly.Tool{Name: "crm_delete", Source: runtimeassembly.SourceMCP, Server: "crm"}
	write := &runtimeassembly.Tool{Name: "write_file", Source: runtimeassembly.SourceConfig, Use: "file.write"}
	b := &runtimeassembly.Base{Agent: &runtimev1.Agent{Name: "default"},
		ByName:   map[string]*runtimeassembly.Tool{"crm_delete": mcp, "write_file": write},
		Deferred: map[string]*runtimeassembly.Tool{"crm_delete": mcp}, DeferredNames: []string{"crm_delete"}, Hash: "h"}
	return &runtimeassembly.View{Base: b, Promoted: map[string]bool{},
		Policy: &runtimeassembly.SkillPolicy{Allowed: map[string]bool{"write_file": true}, Skills: []string{"notes"}}}
}

func run(t *testing.T, d Deps, name string) *Outcome {
	t.Helper()
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}, ReadMarks: map[string]string{}}
	c := NewCall(th, "", &runtimev1.ToolCall{Id: "c1", Name: name}, nil)
	o := Standard(d).Run(context.Background(), c)
	if o == nil {
		t.Fatal("nil outcome")
	}
	return o
}

// TestAuthorizationIsOutsideSkillPolicyAndDeferral: a viewer calling a
// deferred tool that the skill policy also forbids is refused by authz
// (authz.denied, so authz audits it) and nothing inner runs; with authz
// allowing, the skill policy refuses; tool_search skips authz only while
// tools are deferred.
func TestAuthorizationIsOutsideSkillPolicyAndDeferral(t *testing.T) {
	az, tools := &fakeAuthz{allow: map[string]bool{}}, &fakeTools{}
	d := Deps{Views: fakeViews{view: testView()}, Authorizer: az, Workspace: fakeWS{}, Tools: tools}
	o := run(t, d, "crm_delete")
	if o.Kind != runtimev1.ErrorKind_ERROR_KIND_POLICY || o.Reason != "authz.denied" || len(tools.called) != 0 || len(az.asked) != 1 {
		t.Fatalf("viewer call: %+v, tools %v, authz asked %v", o, tools.called, az.asked)
	}
	az.allow["crm_delete"] = true
	if o := run(t, d, "crm_delete"); o.Reason != "skill_policy.denied" {
		t.Fatalf("allowed by authz, outside the skill policy: %+v", o)
	}
	v := testView()
	v.Policy = nil
	d.Views = fakeViews{view: v}
	if o := run(t, d, "crm_delete"); o.Reason != "deferred.not_promoted" || len(tools.called) != 0 {
		t.Fatalf("deferred, not promoted: %+v", o)
	}
	v.Promoted["crm_delete"] = true
	if o := run(t, d, "crm_delete"); o.Text != "ran crm_delete" {
		t.Fatalf("promoted: %+v", o)
	}
	az.asked = nil
	if o := run(t, d, runtimeassembly.ToolSearchName); o.Text != "ran tool_search" || len(az.asked) != 0 {
		t.Fatalf("tool_search with a deferred set: %+v, authz asked %v", o, az.asked)
	}
	if o := run(t, d, "nope"); o.Reason != "authz.denied" {
		t.Fatalf("unknown name is still authorized first: %+v", o)
	}
	az.allow["nope"] = true
	if o := run(t, d, "nope"); o.Reason != "tool.unknown" {
		t.Fatalf("unknown name: %+v", o)
	}
	// authz failing is a denial (fail closed).
	az.err = status.Error(codes.Unavailable, "down")
	if o := run(t, d, "crm_delete"); o.Reason != "authz.evaluator_error" {
		t.Fatalf("authz down: %+v", o)
	}
}

// TestAssemblyFailureAndErrorNormalisation: a failed assembly refuses the
// call before authz; inner errors become BUSINESS or RUNTIME results.
func TestAssemblyFailureAndErrorNormalisation(t *testing.T) {
	az, tools := &fakeAuthz{allow: map[string]bool{"write_file": true}}, &fakeTools{}
	d := Deps{Views: fakeViews{err: &runtimeassembly.FailedError{Msg: "catalog unreachable: x"}}, Authorizer: az, Workspace: fakeWS{}, Tools: tools}
	if o := run(t, d, "write_file"); o.Reason != "assembly.failed" || !strings.Contains(o.Text, "catalog unreachable: x") || len(az.asked) != 0 {
		t.Fatalf("assembly failure: %+v", o)
	}
	d.Views = fakeViews{view: testView()}
	tools.err = Business("content must be a string")
	if o := run(t, d, "write_file"); o.Kind != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || o.Text != "Error: content must be a string" {
		t.Fatalf("business error: %+v", o)
	}
	tools.err = errors.New("boom")
	if o := run(t, d, "write_file"); o.Kind != runtimev1.ErrorKind_ERROR_KIND_RUNTIME || !strings.Contains(o.Text, "failed with Exception: boom") {
		t.Fatalf("runtime error: %+v", o)
	}
}

// TestReadBeforeWriteAndArguments: writing an existing, unread file is
// refused; malformed raw arguments are a BUSINESS error.
func TestReadBeforeWriteAndArguments(t *testing.T) {
	az, tools := &fakeAuthz{allow: map[string]bool{"write_file": true}}, &fakeTools{}
	d := Deps{Views: fakeViews{view: testView()}, Authorizer: az, Workspace: fakeWS{digest: "abc"}, Tools: tools}
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}, ReadMarks: map[string]string{}}
	call := func(raw string) *Outcome {
		c := NewCall(th, "", &runtimev1.ToolCall{Id: "c1", Name: "write_file", RawArguments: raw}, nil)
		return Standard(d).Run(context.Background(), c)
	}
	if o := call(`{"path":"/mnt/user-data/workspace/a.md","content":"x"}`); o.Reason != "read_before_write.unread" || len(tools.called) != 0 {
		t.Fatalf("unread write: %+v", o)
	}
	th.ReadMarks["/mnt/user-data/workspace/a.md"] = "abc"
	if o := call(`{"path":"/mnt/user-data/workspace/a.md","content":"x"}`); o.Text != "ran write_file" {
		t.Fatalf("read, then write: %+v", o)
	}
	if o := call(`{"path":`); o.Kind != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || !strings.Contains(o.Text, "not a valid JSON object") {
		t.Fatalf("malformed arguments: %+v", o)
	}
}
