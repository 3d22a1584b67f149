package runtimechain

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

type argTools struct {
	name string
	args map[string]any
}

func (a *argTools) CallTool(_ context.Context, c *Call) (*Outcome, error) {
	a.name, a.args = c.Name, c.ArgsPB.AsMap()
	return &Outcome{Text: "ran"}, nil
}

// unionView has a tool whose root union has a string branch (dropped: MCP
// arguments are objects) and two object branches that can't be merged
// (date is a string in one, an integer in the other), so the profiles but
// mcp wrap it into "input".
func unionView(t *testing.T) *runtimeassembly.View {
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(`{"anyOf": [{"type": "string"}, {"type": "object", "properties": {"date": {"type": "string"}, "hd-only": {"type": "boolean"}}}, {"type": "object", "properties": {"date": {"type": "integer"}}, "required": ["date"]}]}`), s); err != nil {
		t.Fatal(err)
	}
	tool := &runtimeassembly.Tool{Name: "nasa/apod", Source: runtimeassembly.SourceMCP, Server: "nasa", Params: s}
	b := &runtimeassembly.Base{Agent: &runtimev1.Agent{Name: "default"}, ByName: map[string]*runtimeassembly.Tool{"nasa/apod": tool}}
	return &runtimeassembly.View{Base: b, Promoted: map[string]bool{}}
}

// TestMapArguments: a call against the bound form reaches the tool with
// its own name and arguments, for every profile; authz sees the tool's name.
func TestMapArguments(t *testing.T) {
	v := unionView(t)
	for _, p := range []runtimev1.ToolProfile{runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT,
		runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES,
		runtimev1.ToolProfile_TOOL_PROFILE_GEMINI, runtimev1.ToolProfile_TOOL_PROFILE_MCP} {
		id, _ := runtimeassembly.ProfileID(p)
		b, err := runtimeassembly.BindTool(v.Base.ByName["nasa/apod"], id)
		if err != nil {
			t.Fatal(err)
		}
		// The model's arguments in the bound form: the inner object, with
		// the property names the profile bound.
		inner := map[string]any{"date": "2026-12-01"}
		hd := "hd-only"
		if p == runtimev1.ToolProfile_TOOL_PROFILE_GEMINI {
			hd = "hd_only"
		}
		inner[hd] = true
		args := map[string]any{"input": inner}
		if b.WrapKey() == "" { // mcp keeps an all-object root union as it is
			args = inner
		}
		want := map[string]any{"date": "2026-12-01", "hd-only": true}
		if p == runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES {
			if !b.Strict {
				t.Fatalf("openai_responses: not strict: %s", b.StrictFallback)
			}
			// Strict mode made the optional hd-only required and nullable:
			// the model's null means "not given".
			inner[hd] = nil
			want = map[string]any{"date": "2026-12-01"}
		}
		raw, _ := json.Marshal(args)
		az, tools := &fakeAuthz{allow: map[string]bool{"nasa/apod": true}}, &argTools{}
		d := Deps{Views: fakeViews{view: v}, Authorizer: az, Workspace: fakeWS{}, Tools: tools}
		th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}, ReadMarks: map[string]string{}}
		c := NewCall(th, "", &runtimev1.ToolCall{Id: "c1", Name: b.Name, RawArguments: string(raw)}, nil)
		c.Profile = p
		o := Standard(d).Run(context.Background(), c)
		if o.Text != "ran" {
			t.Fatalf("%v: %+v", p, o)
		}
		if tools.name != "nasa/apod" || !reflect.DeepEqual(tools.args, want) {
			t.Fatalf("%v: the tool got %q %v, want nasa/apod %v", p, tools.name, tools.args, want)
		}
		if len(az.asked) != 1 || az.asked[0] != "nasa/apod" {
			t.Fatalf("%v: authz asked %v", p, az.asked)
		}
		if p != runtimev1.ToolProfile_TOOL_PROFILE_MCP && c.BoundName != b.Name {
			t.Fatalf("%v: bound name %q not kept", p, c.BoundName)
		}
		// A non-object inner value is the model's to fix.
		if b.WrapKey() == "" {
			continue
		}
		c = NewCall(th, "", &runtimev1.ToolCall{Id: "c2", Name: b.Name, RawArguments: `{"input": "today"}`}, nil)
		c.Profile = p
		if o := Standard(d).Run(context.Background(), c); o.Kind != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || !strings.Contains(o.Text, "arguments.input: must be a JSON object") {
			t.Fatalf("%v: %+v", p, o)
		}
	}
	// The tool's own shape under its own name passes through unchanged.
	tools := &argTools{}
	d := Deps{Views: fakeViews{view: v}, Authorizer: &fakeAuthz{allow: map[string]bool{"nasa/apod": true}}, Workspace: fakeWS{}, Tools: tools}
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}, ReadMarks: map[string]string{}}
	c := NewCall(th, "", &runtimev1.ToolCall{Id: "c3", Name: "nasa/apod", RawArguments: `{"date": "x"}`}, nil)
	if o := Standard(d).Run(context.Background(), c); o.Text != "ran" || !reflect.DeepEqual(tools.args, map[string]any{"date": "x"}) {
		t.Fatalf("own shape: %+v %v", o, tools.args)
	}
}
