package runtime_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// TestAllFourServices runs the pipeline with catalog, authz, skills and
// runtime in one process (the runtime reaching the others through its gRPC
// clients with the process's service credential), real npm MCP servers, the
// shipped default policy and a skill installed through the skills service.
func TestAllFourServices(t *testing.T) {
	s := newRealSuite(t)
	ctx := context.Background()
	alice := s.rt(aliceToken)
	admin := authzv1.NewAuthzServiceClient(s.dial(adminToken))
	skills := skillsv1.NewSkillsServiceClient(s.dial(aliceToken))

	skillMD := "---\nname: graph-reader\ndescription: Read the knowledge graph and nothing else.\nallowed-tools: [memory_read_graph]\n---\n# Graph reader\nUse memory_read_graph only.\n"
	if _, err := skills.InstallSkill(ctx, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
		Name: "graph-reader", Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: []byte(skillMD)}}}}}); err != nil {
		t.Fatalf("InstallSkill: %v", err)
	}

	th := newThread(t, alice, nil)
	r := assemble(t, alice, th, "hello")
	bound := names(r.GetTools())
	if !bound["tool_search"] || !bound["read_file"] || bound["memory_create_entities"] || !slices.Contains(r.GetDeferred(), "memory_create_entities") {
		t.Fatalf("assembly: bound %v, deferred %d", bound, len(r.GetDeferred()))
	}
	if r.GetPolicyVersion() == 0 || r.GetCatalogHash() == "" {
		t.Errorf("policy version %d, hash %q", r.GetPolicyVersion(), r.GetCatalogHash())
	}
	if !bound["describe_skill"] || !strings.Contains(section(r, "skills"), "graph-reader") {
		t.Errorf("installed skill not offered: %v", section(r, "skills"))
	}

	// Deferred call refused, tool_search promotes, the call then works.
	res := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{map[string]any{"name": "Nope", "entityType": "t", "observations": []any{"o"}}}})
	if res.GetReasonCode() != "deferred.not_promoted" {
		t.Fatalf("deferred call: %v", res)
	}
	if sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities,memory_read_graph"}); len(sr.GetPromoted().GetNames()) != 2 {
		t.Fatalf("tool_search: %v", sr)
	}
	if g := call(t, alice, th, "memory_read_graph", map[string]any{}); g.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || strings.Contains(text(g), "Nope") {
		t.Fatalf("read_graph: %v", g)
	}
	if c := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{map[string]any{"name": "Yes", "entityType": "t", "observations": []any{"o"}}}}); c.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("create after promotion: %v", c)
	}

	// Authz denies at assembly and at call (policy lines added by an admin).
	if _, err := admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "everything_get-sum", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "memory_create_entities", Action: authzv1.Action_ACTION_CALL, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
	}}); err != nil {
		t.Fatalf("AddPolicies: %v", err)
	}
	r = eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r := assemble(t, alice, th, "")
		return r, !slices.Contains(r.GetDeferred(), "everything_get-sum")
	})
	// A user is not told the names it may never see (report.denied is
	// for admins only, docs/architecture.md §5).
	if len(r.GetReport().GetDenied()) != 0 {
		t.Errorf("report.denied shown to a user: %v", r.GetReport().GetDenied())
	}
	// The deferred set changed with the policy, so did its hash; the
	// promoted tools' definitions did not, so they stay bound.
	if !names(r.GetTools())["memory_create_entities"] || !names(r.GetTools())["memory_read_graph"] {
		t.Fatal("an unrelated change of the deferred set dropped promotions")
	}
	call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_create_entities,memory_read_graph"})
	d := call(t, alice, th, "memory_create_entities", map[string]any{"entities": []any{map[string]any{"name": "Denied", "entityType": "t", "observations": []any{"o"}}}})
	if d.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY || !strings.HasPrefix(text(d), "Guardrail denied:") {
		t.Fatalf("call not denied: %v", d)
	}
	if g := call(t, alice, th, "memory_read_graph", map[string]any{}); strings.Contains(text(g), "Denied") {
		t.Fatal("a denied call reached the MCP server")
	}

	// Skills: slash activation narrows; reading SKILL.md activates.
	r = assemble(t, alice, th, "/graph-reader what is in the graph?")
	if r.GetSkipModel() || r.GetActivatedSkill().GetName() != "graph-reader" {
		t.Fatalf("slash activation: skip=%v %q %v", r.GetSkipModel(), r.GetDirectAnswer(), r.GetActivatedSkill())
	}
	bound = names(r.GetTools())
	if !bound["memory_read_graph"] || bound["ls"] || bound["write_file"] {
		t.Fatalf("skill policy did not narrow: %v (%v)", bound, r.GetReport())
	}
	if sr := call(t, alice, th, "tool_search", map[string]any{"query": "select:memory_open_nodes,memory_read_graph"}); fmt.Sprint(sr.GetPromoted().GetNames()) != "[memory_read_graph]" {
		t.Fatalf("tool_search under the skill: %v", sr.GetPromoted())
	}
	if r := assemble(t, alice, th, "/not-installed-skill go"); !r.GetSkipModel() || !strings.Contains(r.GetDirectAnswer(), "not installed") {
		t.Errorf("unknown skill: %v", r)
	}
	th2 := newThread(t, alice, nil)
	rd := call(t, alice, th2, "read_file", map[string]any{"path": "/mnt/skills/custom/graph-reader/SKILL.md"})
	if rd.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(rd), "Use memory_read_graph only.") {
		t.Fatalf("read SKILL.md: %v", rd)
	}
	g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th2})
	if as := g.GetThread().GetActiveSkills(); len(as) != 1 || as[0].GetSource() != runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_READ {
		t.Fatalf("reading SKILL.md did not activate: %v", as)
	}
	if dsc := call(t, alice, th2, "describe_skill", map[string]any{"name": "graph"}); !strings.Contains(text(dsc), "## Skill: graph-reader") {
		t.Errorf("describe_skill: %s", text(dsc))
	}

	// 100 concurrent tool_search calls on one thread keep every promotion.
	th3 := newThread(t, alice, nil)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := alice.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th3, ToolCall: &runtimev1.ToolCall{
				Id: fmt.Sprintf("c%d", i), Name: "tool_search", Arguments: args(t, map[string]any{"query": fmt.Sprintf("select:bulk_tool_%03d", i)})}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th3}); len(g.GetThread().GetPromoted().GetNames()) != 100 {
		t.Fatalf("promotions kept: %d", len(g.GetThread().GetPromoted().GetNames()))
	}

	// Output budget with a real MCP result, read back with read_file.
	call(t, alice, th3, "tool_search", map[string]any{"query": "select:everything_echo"})
	long := strings.Repeat("0123456789abcdef\n", 1500)
	big := call(t, alice, th3, "everything_echo", map[string]any{"message": long})
	if len(big.GetArtifacts()) != 1 || len(text(big)) > 5000 {
		t.Fatalf("not externalised: %d chars", len(text(big)))
	}
	if back, _ := readPaged(t, alice, th3, big.GetArtifacts()[0].GetPath(), 12000); !strings.Contains(back, long) {
		t.Fatal("externalised output not readable in full, page by page")
	}

	// Catalog drift (a server disabled by an admin) keeps the promotions:
	// unrelated tools stay bound, the disabled server's promoted tool stays
	// promoted, is reported unavailable and its call says to retry.
	hashBefore := assemble(t, alice, th3, "").GetCatalogHash()
	cat := catalogv1.NewCatalogServiceClient(s.dial(adminToken))
	off := false
	if _, err := cat.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	drifted := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r := assemble(t, alice, th3, "")
		return r, r.GetCatalogHash() != hashBefore
	})
	if !names(drifted.GetTools())["bulk_tool_000"] {
		t.Fatal("catalog drift dropped an unrelated promotion")
	}
	if !slices.Contains(drifted.GetReport().GetPromotedUnavailable(), "everything_echo") || names(drifted.GetTools())["everything_echo"] {
		t.Fatalf("disabled server's promoted tool: unavailable %v", drifted.GetReport().GetPromotedUnavailable())
	}
	if r := call(t, alice, th3, "everything_echo", map[string]any{"message": "x"}); r.GetReasonCode() != "tool.server_unavailable" || !strings.Contains(text(r), "retry") {
		t.Fatalf("call of an unavailable promoted tool: %v", r)
	}
	on := true
	if _, err := cat.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "everything", Server: &catalogv1.ServerUpdate{Enabled: &on}}); err != nil {
		t.Fatal(err)
	}
	s.waitServers()
	back := eventually(t, func() (*runtimev1.AssembleToolsResponse, bool) {
		r := assemble(t, alice, th3, "")
		return r, names(r.GetTools())["everything_echo"]
	})
	if len(back.GetReport().GetPromotedUnavailable()) != 0 {
		t.Fatalf("still unavailable after the server came back: %v", back.GetReport().GetPromotedUnavailable())
	}

	// Another principal: bob sees nothing.
	bob := s.rt(bobToken)
	if _, err := bob.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
		t.Errorf("bob AssembleTools: %v", err)
	}

	// Restart keeps the thread state.
	before, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
	s.restart()
	alice = s.rt(aliceToken)
	after, err := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after.GetThread().GetPromoted(), after.GetThread().GetActiveSkills()) != fmt.Sprint(before.GetThread().GetPromoted(), before.GetThread().GetActiveSkills()) {
		t.Fatalf("state changed across restart:\n%v\n%v", before.GetThread(), after.GetThread())
	}
}

// TestReviewSkillPackageSources: review_skill_package reviews, through the
// real skills service, a folder in the workspace (inline files), an
// uploaded archive, inline SKILL.md text and an installed skill — without
// installing or activating anything — and refuses paths outside the thread.
func TestReviewSkillPackageSources(t *testing.T) {
	s := newRealSuite(t)
	ctx := context.Background()
	alice := s.rt(aliceToken)
	th := newThread(t, alice, nil)
	md := func(name string) string {
		return "---\nname: " + name + "\ndescription: A skill under review.\n---\n# " + name + "\nSay hello.\n"
	}
	call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/pkg/SKILL.md", "content": md("dir-skill")})
	call(t, alice, th, "write_file", map[string]any{"path": "/mnt/user-data/workspace/pkg/references/key.txt",
		"content": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\n"})
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("zipped-skill/SKILL.md")
	_, _ = w.Write([]byte(md("zipped-skill")))
	_ = zw.Close()
	uploads := filepath.Join(s.dataDir, "runtime", "threads", th, "user-data", "uploads")
	if err := os.WriteFile(filepath.Join(uploads, "zipped.skill"), zb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(uploads, "escape.skill")); err != nil {
		t.Fatal(err)
	}
	review := func(a map[string]any) *runtimev1.ToolResult {
		t.Helper()
		r := call(t, alice, th, "review_skill_package", a)
		t.Logf("review %v: %s %.300s", a["target"], r.GetStatus(), text(r))
		return r
	}
	ok := func(r *runtimev1.ToolResult, want ...string) {
		t.Helper()
		if r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || len(r.GetArtifacts()) != 1 {
			t.Fatalf("review failed: %v", r)
		}
		for _, w := range want {
			if !strings.Contains(text(r), w) {
				t.Errorf("review text lacks %q: %.500s", w, text(r))
			}
		}
	}
	ok(review(map[string]any{"target": "/mnt/user-data/workspace/pkg"}), "dir-skill", "secret-private-key", "untrusted_review_data")
	ok(review(map[string]any{"target": "/mnt/user-data/uploads/zipped.skill"}), "zipped-skill")
	ok(review(map[string]any{"target": "inline://inline-skill", "inline_content": md("inline-skill")}), "inline-skill")
	// A file that is not an archive is reviewed as a refused package.
	ok(review(map[string]any{"target": "/mnt/user-data/workspace/pkg/SKILL.md"}), "unknown_format")
	for _, bad := range []map[string]any{
		{"target": "/etc/passwd"},
		{"target": "/mnt/user-data/../../../etc"},
		{"target": "/mnt/user-data/workspace/none"},
		{"target": "/mnt/user-data/uploads/escape.skill"},
		{"target": "inline://x"},
	} {
		if r := review(bad); r.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS {
			t.Errorf("review %v: %v", bad, r)
		}
	}
	g, _ := alice.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
	if len(g.GetThread().GetActiveSkills()) != 0 {
		t.Errorf("reviewing activated %v", g.GetThread().GetActiveSkills())
	}
	ls, err := skillsv1.NewSkillsServiceClient(s.dial(aliceToken)).ListSkills(ctx, &skillsv1.ListSkillsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sk := range ls.GetSkills() {
		if strings.HasSuffix(sk.GetName(), "-skill") {
			t.Errorf("reviewing installed %s", sk.GetName())
		}
	}
}
