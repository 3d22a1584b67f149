//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testkit"
)

// debugJSONLog makes the process log one JSON line per RPC (the "rpc" lines
// of the interceptor chain are debug level).
const debugJSONLog = "server:\n  log:\n    level: debug\n    format: json\n"

// everythingConfig writes an extensions_config.json with the pinned npm
// server-everything (stdio) as server "everything".
func everythingConfig(t *testing.T) string {
	t.Helper()
	js := testkit.NPMServer(t, "server-everything")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "node", "args": []string{js, "stdio"}},
	}})
	p := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// logLine is one JSON log record of a process.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// jsonLines parses the JSON log lines of stderr (other lines are skipped).
func jsonLines(stderr string) []logLine {
	var out []logLine
	for _, l := range strings.Split(stderr, "\n") {
		var m logLine
		if json.Unmarshal([]byte(l), &m) == nil && m != nil {
			out = append(out, m)
		}
	}
	return out
}

// rpcLines returns the "rpc" lines of request id among lines, by service
// ("runtime", "authz", ... from the method name).
func rpcLines(lines []logLine, id string) map[string][]logLine {
	out := map[string][]logLine{}
	for _, l := range lines {
		if l.str("msg") != "rpc" || l.str("request_id") != id {
			continue
		}
		m := strings.TrimPrefix(l.str("method"), "/toolplane.")
		if i := strings.IndexByte(m, '.'); i > 0 {
			out[m[:i]] = append(out[m[:i]], l)
		}
	}
	return out
}

// executeEcho runs, over REST on rt, a thread whose everything_echo is
// callable (promoted when deferred), then one ExecuteToolCall of it with
// X-Request-Id id and W3C trace context traceID; it returns the echo text.
func executeEcho(t *testing.T, rt *testkit.Process, id, traceID string) string {
	t.Helper()
	r := rest(t, rt, "POST", "/v1/threads", "", "{}")
	th, _ := r.Body["thread"].(map[string]any)
	tid, _ := th["thread_id"].(string)
	if r.Status != 200 || tid == "" {
		t.Fatalf("create thread: %d %s", r.Status, r.Raw)
	}
	// The catalog starts its MCP child in the background.
	deferred := false
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		r = rest(t, rt, "POST", "/v1/threads/"+tid+":assemble", "", `{"user_message": "echo something"}`)
		if strings.Contains(r.Raw, `"everything_echo"`) {
			d, _ := r.Body["deferred"].([]any)
			deferred = slices.Contains(d, any("everything_echo"))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything_echo never assembled: %d %s", r.Status, r.Raw)
		}
	}
	if deferred {
		r = rest(t, rt, "POST", "/v1/threads/"+tid+":executeToolCall", "", `{"tool_call": {"id": "s1", "name": "tool_search", "arguments": {"query": "select:everything_echo"}}}`)
		if r.Status != 200 || !strings.Contains(r.Raw, "everything_echo") {
			t.Fatalf("promote: %d %s", r.Status, r.Raw)
		}
	}
	r = rest(t, rt, "POST", "/v1/threads/"+tid+":executeToolCall", "",
		`{"tool_call": {"id": "c1", "name": "everything_echo", "arguments": {"message": "same id everywhere"}}}`,
		"X-Request-Id", id, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if r.Status != 200 || !strings.Contains(r.Raw, "same id everywhere") || !strings.Contains(r.Raw, "TOOL_CALL_STATUS_SUCCESS") {
		t.Fatalf("execute everything_echo: %d %s", r.Status, r.Raw)
	}
	return r.Raw
}

// allThree reports which of the runtime's, authz's and catalog's rpc lines
// of request id are not logged yet.
func allThree(lines []logLine, id string) error {
	by := rpcLines(lines, id)
	for _, svc := range []string{"runtime", "authz", "catalog"} {
		if len(by[svc]) == 0 {
			return fmt.Errorf("no %s line yet", svc)
		}
	}
	return nil
}

// checkOneRequest asserts that the runtime's, authz's and catalog's rpc lines
// of request id exist and all carry traceID.
func checkOneRequest(t *testing.T, lines []logLine, id, traceID string) {
	t.Helper()
	by := rpcLines(lines, id)
	want := map[string]string{
		"runtime": "/toolplane.runtime.v1.RuntimeService/ExecuteToolCall",
		"authz":   "/toolplane.authz.v1.AuthzService/Authorize",
		"catalog": "/toolplane.catalog.v1.CatalogService/CallTool",
	}
	for svc, method := range want {
		found := false
		for _, l := range by[svc] {
			found = found || l.str("method") == method
			if l.str("trace_id") != traceID {
				t.Errorf("%s line %v: trace_id %q, want %s", svc, l, l.str("trace_id"), traceID)
			}
		}
		if !found {
			t.Errorf("no %s line of request %s (lines of the request: %v)", method, id, by)
		}
	}
	// No line of the request carries another request id: the runtime's
	// upstream calls did not make up their own.
	for _, l := range lines {
		if l.str("msg") == "rpc" && l.str("trace_id") == traceID && l.str("request_id") != id {
			t.Errorf("line of the same trace under another request id: %v", l)
		}
	}
}

// TestRequestIDAcrossServices: a REST ExecuteToolCall of an MCP tool with
// X-Request-Id and a W3C traceparent leaves runtime, authz and catalog log
// lines that share the id and the trace id, in one process and with the
// runtime in a process of its own (the upstreams reached over loopback gRPC).
func TestRequestIDAcrossServices(t *testing.T) {
	ext := everythingConfig(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"

	t.Run("one process", func(t *testing.T) {
		p := testkit.Start(t, testkit.Options{Config: debugJSONLog, Args: []string{"--extensions-config", ext}})
		id := fmt.Sprintf("e2e-one-%d", time.Now().UnixNano())
		executeEcho(t, p, id, traceID)
		// Each process's stderr is read asynchronously, and the runtime's rpc
		// line is written after its upstream calls: wait for all three.
		testkit.Eventually(t, 10*time.Second, "log lines of the call", func() error {
			return allThree(jsonLines(p.Stderr()), id)
		})
		checkOneRequest(t, jsonLines(p.Stderr()), id, traceID)
	})

	t.Run("split", func(t *testing.T) {
		up := testkit.Start(t, testkit.Options{Config: debugJSONLog, Args: []string{"--services", "catalog,authz,skills", "--extensions-config", ext}})
		cfg := debugJSONLog + "runtime:\n  upstreams:\n"
		for _, s := range []string{"catalog", "authz", "skills"} {
			cfg += "    " + s + ":\n      address: " + up.GRPCAddr + "\n"
		}
		rt := testkit.Start(t, testkit.Options{Config: cfg, Args: []string{"--services", "runtime"}})
		id := fmt.Sprintf("e2e-split-%d", time.Now().UnixNano())
		executeEcho(t, rt, id, traceID)
		testkit.Eventually(t, 10*time.Second, "log lines of the call", func() error {
			return allThree(append(jsonLines(rt.Stderr()), jsonLines(up.Stderr())...), id)
		})
		lines := append(jsonLines(rt.Stderr()), jsonLines(up.Stderr())...)
		checkOneRequest(t, lines, id, traceID)
		// The upstream lines are the upstream process's own.
		if n := len(rpcLines(jsonLines(rt.Stderr()), id)["catalog"]); n != 0 {
			t.Errorf("the runtime process logged %d catalog lines; the catalog runs elsewhere", n)
		}
	})
}
