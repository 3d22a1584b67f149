package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/services/catalog"
)

// TestChurningDescriptionKeepsTheBinding: a real stdio MCP server
// (tpfixture, TPFIXTURE_FLIP) whose tool description changes on every
// tools/list. The tool is promoted; then the server flips it six times.
// After the catalog's churn guard engages (the second change within
// catalog.definition_churn.window, docs/decisions/0097-definition-churn-guard.md)
// the bound form the provider sees stays byte-identical and promoted, so
// its prompt cache and the promotion survive; the tool still answers.
func TestChurningDescriptionKeepsTheBinding(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join(dir, "tpfixture")
	if out, err := exec.Command("go", "build", "-o", fixture, "github.com/toolplane/toolplane/tests/fixtures/mcp/tpfixture").CombinedOutput(); err != nil {
		t.Fatalf("building tpfixture: %v\n%s", err, out)
	}
	s := &loopSuite{t: t, dataDir: filepath.Join(dir, "data"), ext: filepath.Join(dir, "ext.json"),
		mutate: func(c *app.Config) {
			// The fixture runs by absolute path; the default changes and window.
			c.Catalog.FileCommandPolicy = "off"
			c.Catalog.DefinitionChurn = catalog.ChurnConfig{Changes: 2, Window: time.Minute, Settle: time.Minute}
		}}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fl": map[string]any{
		"command": fixture, "args": []string{"serve"}, "env": map[string]string{"TPFIXTURE_FLIP": "1"}}}})
	if err := os.WriteFile(s.ext, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	c := s.rt()
	ctx := context.Background()
	th := s.thread(c)
	bound := func() string {
		t.Helper()
		r, err := c.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, Profile: runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES})
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range r.GetTools() {
			if ts.GetName() == "fl_flip" {
				if ts.GetBound().AsMap()["defer_loading"] == true {
					return "" // deferred again: the promotion was dropped
				}
				b, _ := json.Marshal(ts.GetBound().AsMap())
				return string(b)
			}
		}
		return ""
	}
	promote := func() string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			call(t, c, th, "tool_search", map[string]any{"query": "select:fl_flip"})
			if b := bound(); b != "" {
				return b
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("fl_flip not promoted")
		return ""
	}
	first := promote()
	flip := func(i int) string {
		t.Helper()
		if r := call(t, c, th, "fl_flip", map[string]any{}); !strings.Contains(text(r), "flipped after list") {
			t.Fatalf("flip %d: %v", i, text(r))
		}
		time.Sleep(1500 * time.Millisecond) // one re-list per second, then the rebuild and the runtime's view
		return bound()
	}
	// The first change reaches the binding: the tool's definition hash
	// changed, so its promotion is dropped and the model searches again.
	if b := flip(0); b != "" {
		t.Fatalf("the first change did not reach the binding (does the fixture flip?): %s", b)
	}
	held := promote()
	if held == first {
		t.Fatal("the re-promoted tool has the old definition")
	}
	// From the second change within the window on, nothing the provider
	// sees moves, and the promotion stays.
	for i := 1; i < 6; i++ {
		b := flip(i)
		if b == "" {
			t.Fatalf("flip %d: the promotion was dropped", i)
		}
		if b != held {
			t.Fatalf("flip %d changed the bound form:\n%s\nwas\n%s", i, b, held)
		}
	}
}

// TestChurningToolTurnedDestructiveIsDenied: the churn guard never holds
// what authz decides on. A viewer whose policy allows only tools annotated
// readOnlyHint true (examples/policy.csv's rule) calls fl_flip of a real
// stdio server (tpfixture TPFIXTURE_FLIP, TPFIXTURE_FLIP_UNSAFE): each call
// flips the description, the guard holds it, and from list 8 on the server
// annotates the tool readOnlyHint false, destructiveHint true. The next
// call after that list is denied: authz sees the live annotations, not the
// held safe ones (docs/decisions/0097-definition-churn-guard.md, addendum).
func TestChurningToolTurnedDestructiveIsDenied(t *testing.T) {
	const unsafeAt = 8
	const viewerToken = "loop-viewer-token-0123456789"
	dir := t.TempDir()
	fixture := filepath.Join(dir, "tpfixture")
	if out, err := exec.Command("go", "build", "-o", fixture, "github.com/toolplane/toolplane/tests/fixtures/mcp/tpfixture").CombinedOutput(); err != nil {
		t.Fatalf("building tpfixture: %v\n%s", err, out)
	}
	policy := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(policy, []byte("p, admin, *, *, *, *, allow\np, viewer, *, mcp_server, *, *, allow\np, viewer, *, tool, *, *, allow, annotation.readOnlyHint == 'true'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &loopSuite{t: t, dataDir: filepath.Join(dir, "data"), ext: filepath.Join(dir, "ext.json"),
		mutate: func(c *app.Config) {
			c.Catalog.FileCommandPolicy = "off"
			c.Catalog.DefinitionChurn = catalog.ChurnConfig{Changes: 2, Window: time.Minute, Settle: time.Minute}
			c.Authz.PolicyFile = policy
			c.Auth.Tokens = append(c.Auth.Tokens, config.Token{Name: "viewer", SHA256: loopSHA(viewerToken), Kind: "user", Subject: "vic", Roles: []string{"viewer"}})
		}}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fl": map[string]any{
		"command": fixture, "args": []string{"serve"}, "env": map[string]string{"TPFIXTURE_FLIP": "1", "TPFIXTURE_FLIP_UNSAFE": "8"}}}})
	if err := os.WriteFile(s.ext, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	c := runtimev1.NewRuntimeServiceClient(s.dial(viewerToken))
	th := s.thread(c)
	listed := 0
	for i := 0; ; i++ {
		if i > 12 {
			t.Fatal("the unsafe definition was never listed")
		}
		// The promotion drops whenever the definition hash changes.
		call(t, c, th, "tool_search", map[string]any{"query": "select:fl_flip"})
		r := call(t, c, th, "fl_flip", map[string]any{"target": "x"})
		var k int
		if _, err := fmt.Sscanf(text(r), "flipped after list %d", &k); err != nil {
			if listed >= unsafeAt && r.GetReasonCode() == "authz.condition_failed" && strings.Contains(text(r), "readOnlyHint") {
				break // denied once the server listed the destructive definition
			}
			t.Fatalf("call %d (last list %d, safe): %s %s", i, listed, r.GetStatus(), text(r))
		}
		if k >= unsafeAt+2 { // two lists after the destructive one: it is served
			t.Fatalf("call %d after list %d (destructive, readOnlyHint false) ran: %s", i, k, text(r))
		}
		listed = k + 1
		time.Sleep(1500 * time.Millisecond) // the re-list, the rebuild and the runtime's view
	}
}
