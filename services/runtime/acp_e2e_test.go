package runtime_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/services/catalog/catalogacp"
)

// TestInvokeACPAgentThroughTheChain runs invoke_acp_agent end to end: the
// catalog runs the fixture ACP agent (official TypeScript SDK) in the
// thread's ACP workspace, the runtime binds the tool and calls it through
// the tool-call chain.
func TestInvokeACPAgentThroughTheChain(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", "catalog", "catalogacp", "testdata", "agent"))
	_, serr := os.Stat(filepath.Join(root, "node_modules", "@agentclientprotocol", "sdk", "package.json"))
	_, nerr := exec.LookPath("node")
	if err := errors.Join(serr, nerr); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
		}
		t.Skipf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
	}
	dir := t.TempDir()
	s := newSuiteWith(t, dir, map[string]any{"mcpServers": map[string]any{}}, false, func(c *app.Config) {
		c.Catalog.ACPAgents = map[string]catalogacp.Agent{"fixture": {Command: "node", Args: []string{filepath.Join(root, "agent.mjs")}, Description: "Echoes what it is told"}}
	})
	alice := s.rt(aliceToken)
	th := newThread(t, alice, nil)

	r := assemble(t, alice, th, "hello")
	var bound *runtimev1.ToolSchema
	for _, ts := range r.GetTools() {
		if ts.GetName() == "invoke_acp_agent" {
			bound = ts
		}
	}
	if bound == nil || bound.GetSource() != "acp" {
		t.Fatalf("invoke_acp_agent not bound from the acp source: %v", names(r.GetTools()))
	}
	desc := bound.GetOpenai().GetFields()["function"].GetStructValue().GetFields()["description"].GetStringValue()
	if !strings.Contains(desc, "- fixture: Echoes what it is told") {
		t.Fatalf("description %q", desc)
	}

	res := call(t, alice, th, "invoke_acp_agent", map[string]any{"agent": "fixture", "prompt": "echo from the runtime"})
	if res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || text(res) != "you said: from the runtime" {
		t.Fatalf("invoke = %v", res)
	}
	ws := filepath.Join(dir, "data", "runtime", "threads", th, "acp-workspace", "answer.txt")
	if b, err := os.ReadFile(ws); err != nil || string(b) != "from the runtime" {
		t.Fatalf("the agent did not write into the thread's ACP workspace: %q, %v", b, err)
	}
	// The lead agent reads the ACP agent's output through read_file.
	if res := call(t, alice, th, "read_file", map[string]any{"path": "/mnt/acp-workspace/answer.txt"}); text(res) != "from the runtime" {
		t.Fatalf("read_file /mnt/acp-workspace/answer.txt = %v", res)
	}
	if res := call(t, alice, th, "invoke_acp_agent", map[string]any{"agent": "fixture", "prompt": "permission"}); text(res) != "permission: no" {
		t.Fatalf("permission = %v", text(res))
	}
	res = call(t, alice, th, "invoke_acp_agent", map[string]any{"agent": "other", "prompt": "echo x"})
	// Refused before anything runs: by the argument check against the
	// tool's schema (agent is an enum) or, without it, by the tool.
	if res.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_BUSINESS || !(strings.Contains(text(res), "agent must be one of fixture") || strings.Contains(text(res), "value must be 'fixture'")) {
		t.Fatalf("unknown agent = %v", res)
	}

	// authz: the agent a call names is authorized per call (acp_agent:
	// fixture, call), after invoke_acp_agent itself was allowed.
	s.az.DenyCall("fixture")
	res = call(t, alice, th, "invoke_acp_agent", map[string]any{"agent": "fixture", "prompt": "echo must not run"})
	if res.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_POLICY || !strings.Contains(text(res), "ACP agent 'fixture' was not invoked") {
		t.Fatalf("denied agent = %v", res)
	}
	if b, _ := os.ReadFile(ws); string(b) != "from the runtime" {
		t.Fatalf("a denied call reached the agent: answer.txt = %q", b)
	}
	// An agent the principal may not list is not offered; with none left,
	// invoke_acp_agent is not bound at all.
	// The policy change reaches the runtime through WatchPolicy
	// (asynchronously): until then a cached assembly may still bind it.
	s.az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_ACP_AGENT, "fixture")
	stillBound := func() bool {
		for _, ts := range assemble(t, alice, th, "hello").GetTools() {
			if ts.GetName() == "invoke_acp_agent" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); stillBound(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("invoke_acp_agent bound with no visible ACP agent")
		}
	}
}
