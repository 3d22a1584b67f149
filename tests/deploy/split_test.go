package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// splitConfig is deploy/k8s/config/<svc>.yaml made runnable on this host:
// the files mounted at /etc/toolplane and /run/secrets/toolplane are the
// repository's, and the Service DNS names are the processes' addresses.
// Nothing else of the shipped file changes.
func splitConfig(t *testing.T, svc string, upstreams map[string]string) string {
	t.Helper()
	cfgDir, _ := filepath.Abs(filepath.Join(deployDir, "k8s", "config"))
	secrets, _ := filepath.Abs(filepath.Join(deployDir, "k8s", "secrets"))
	b := read(t, "k8s/config/"+svc+".yaml")
	b = bytes.ReplaceAll(b, []byte("/etc/toolplane/"), []byte(cfgDir+"/"))
	b = bytes.ReplaceAll(b, []byte("/run/secrets/toolplane/"), []byte(secrets+"/"))
	for name, addr := range upstreams {
		b = bytes.ReplaceAll(b, []byte("address: "+name+":7420"), []byte("address: "+addr))
	}
	return string(b)
}

// The split topology of deploy/ run for real, without containers: four
// `toolplane serve` processes on the shipped per-service configs (auth on,
// the runtime reaching the others with the Secret's service token), one MCP
// server behind the catalog. The walk-through then runs against the runtime
// over gRPC and through its MCP front door.
func TestSplitTopologyRuns(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	everything := filepath.Join(root, ".tools", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(everything); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("server-everything not installed (scripts/install-npm.sh)")
		}
		t.Skip("server-everything not installed (scripts/install-npm.sh)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "node", "args": []string{everything, "stdio"}},
	}})
	extPath := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		t.Fatal(err)
	}

	addrs := map[string]string{}
	for _, svc := range []string{"catalog", "authz", "skills"} {
		o := testkit.Options{Config: splitConfig(t, svc, nil), Env: testkit.Env()}
		if svc == "catalog" {
			o.Args = []string{"--extensions-config", extPath}
		}
		addrs[svc] = testkit.Start(t, o).GRPCAddr
	}
	rt := testkit.Start(t, testkit.Options{Config: splitConfig(t, "runtime", addrs), Env: testkit.Env()})

	conn := rt.Dial(t)
	rc := runtimev1.NewRuntimeServiceClient(conn)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
	}
	editor := as("tp-demo-editor")
	th, err := rc.CreateThread(editor, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatalf("CreateThread through the split runtime: %v", err)
	}
	id := th.GetThread().GetThreadId()
	// The catalog connects to its MCP server in the background.
	var asm *runtimev1.AssembleToolsResponse
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		asm, err = rc.AssembleTools(editor, &runtimev1.AssembleToolsRequest{ThreadId: id})
		if err == nil && slices.Contains(asm.GetDeferred(), "everything_get-sum") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything_get-sum never deferred: %v %v", asm.GetDeferred(), err)
		}
	}
	exec := func(ctx context.Context, thread, name string, args map[string]any) *runtimev1.ToolResult {
		t.Helper()
		st, _ := structpb.NewStruct(args)
		r, err := rc.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: thread, ToolCall: &runtimev1.ToolCall{Id: name, Name: name, Arguments: st}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r.GetResult()
	}
	if r := exec(editor, id, "tool_search", map[string]any{"query": "select:everything_get-sum"}); !slices.Contains(r.GetPromoted().GetNames(), "everything_get-sum") {
		t.Fatalf("tool_search through authz/catalog processes promoted %v", r.GetPromoted().GetNames())
	}
	if r := exec(editor, id, "everything_get-sum", map[string]any{"a": 2, "b": 3}); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(r.GetContent()[0].GetText(), "5") {
		t.Fatalf("promoted call: %v", r)
	}

	// The front door of the split runtime, as the viewer: listed, and the
	// write-denying policy of the authz process applies.
	tr, err := transport.NewStreamableHTTP(rt.URL("/mcp"), transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tp-demo-viewer"}))
	if err != nil {
		t.Fatal(err)
	}
	mc := client.NewClient(tr, client.WithLegacyProtocolOnly())
	defer mc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatalf("MCP initialize at the split runtime's /mcp: %v", err)
	}
	lt, err := mc.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "tool_search") || slices.Contains(names, "write_file") {
		t.Fatalf("viewer's tools/list = %v: want tool_search, and no write_file (denied by the policy)", names)
	}
}
