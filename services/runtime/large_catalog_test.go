package runtime_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// writeReplicatedCatalog writes a static tool file of n tools made from the
// real 2,247-tool mcpm-registry catalog (testdata/mcp-catalog), copy k
// renamed `<name>_r<k>` on server `<server>_r<k>`, so that every name is
// unique and the descriptions and schemas stay realistic.
func writeReplicatedCatalog(t testing.TB, n int) string {
	t.Helper()
	src, err := os.ReadFile(testkit.SharedData(t, "mcp-catalog/mcpm-registry/tools.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for _, l := range strings.Split(string(src), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("tools-%d.jsonl", n))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := 0; i < n; i++ {
		r := rows[i%len(rows)]
		k := i / len(rows)
		out := map[string]any{"name": fmt.Sprintf("%s_r%d", r["name"], k), "description": r["description"], "input_schema": r["input_schema"], "server": fmt.Sprintf("%s_r%d", r["server"], k)}
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAssemblyBeyondTheAuthzCandidateCap: with more visible tools than one
// FilterResources call accepts (10,000, services/authz/validate.go) the
// runtime filters in batches, so assembly, tool_search and every other call
// (read_file included) still work (docs/decisions/0140-batched-candidate-filtering.md).
// The 100,000-tool form runs in bench/e2e (make bench-e2e).
func TestAssemblyBeyondTheAuthzCandidateCap(t *testing.T) {
	const n = 12_500
	path := writeReplicatedCatalog(t, n)
	s := newSuiteWith(t, t.TempDir(), map[string]any{"mcpServers": map[string]any{"big": map[string]any{"type": "static", "path": path}}}, true, nil)
	alice := s.rt(aliceToken)
	th := newThread(t, alice, nil)
	var r *runtimev1.AssembleToolsResponse
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = assemble(t, alice, th, "")
		if len(r.GetDeferred()) == n || time.Now().After(deadline) {
			break
		}
	}
	if got := len(r.GetDeferred()); got != n {
		t.Fatalf("deferred %d tools, want all %d (denied %d, notes %v)", got, n, len(r.GetReport().GetDenied()), r.GetReport().GetNotes())
	}
	if r.GetCatalogHash() == "" {
		t.Fatal("no catalog hash for the deferred set")
	}
	last := r.GetDeferred()[n-1]
	res := call(t, alice, th, "tool_search", map[string]any{"query": "select:" + last})
	if !strings.Contains(text(res), `"name": "`+last+`"`) || res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("tool_search select:%s: %v %q", last, res.GetStatus(), text(res))
	}
	res = call(t, alice, th, "tool_search", map[string]any{"query": "weather forecast"})
	if res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(res), `"parameters"`) {
		t.Fatalf("tool_search weather forecast: %v %q", res.GetStatus(), text(res))
	}
	res = call(t, alice, th, "read_file", map[string]any{"path": "/mnt/user-data/outputs/missing.txt"})
	if strings.Contains(text(res), "assembly") {
		t.Fatalf("read_file failed on assembly: %q", text(res))
	}
	r = assemble(t, alice, th, "")
	if !names(r.GetTools())[last] {
		t.Fatalf("%s not bound after tool_search promoted it", last)
	}
}
