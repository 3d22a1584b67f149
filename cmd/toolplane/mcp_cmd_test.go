package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// mcpRuntime is a RuntimeService recording what `toolplane mcp` sends.
type mcpRuntime struct {
	runtimev1.UnimplementedRuntimeServiceServer
	mu     sync.Mutex
	agents []string
	auths  []string
	calls  []string
}

func (r *mcpRuntime) seen(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.auths = append(r.auths, strings.Join(md.Get("authorization"), ","))
	r.mu.Unlock()
}

func (r *mcpRuntime) CreateThread(ctx context.Context, req *runtimev1.CreateThreadRequest) (*runtimev1.CreateThreadResponse, error) {
	r.seen(ctx)
	r.mu.Lock()
	r.agents = append(r.agents, req.GetAgent())
	r.mu.Unlock()
	return &runtimev1.CreateThreadResponse{Thread: &runtimev1.Thread{ThreadId: "t1", Agent: req.GetAgent()}}, nil
}

func (r *mcpRuntime) AssembleTools(ctx context.Context, _ *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	r.seen(ctx)
	an, _ := structpb.NewStruct(map[string]any{"name": "tool_search", "description": "Search tools.", "input_schema": map[string]any{"type": "object"}})
	return &runtimev1.AssembleToolsResponse{Tools: []*runtimev1.ToolSchema{{Name: "tool_search", Anthropic: an}}, Deferred: []string{"memory_read_graph"}}, nil
}

func (r *mcpRuntime) ExecuteToolCallStream(req *runtimev1.ExecuteToolCallStreamRequest, st grpc.ServerStreamingServer[runtimev1.ExecuteToolCallStreamResponse]) error {
	r.seen(st.Context())
	r.mu.Lock()
	r.calls = append(r.calls, req.GetThreadId()+"/"+req.GetToolCall().GetName())
	r.mu.Unlock()
	return st.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Result{Result: &runtimev1.ToolResult{
		Name: req.GetToolCall().GetName(), Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, ErrorKind: runtimev1.ErrorKind_ERROR_KIND_POLICY,
		Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "Error: deferred; call tool_search first"}},
	}}})
}

// `toolplane mcp --runtime-addr ... --agent ... --token ...` speaks MCP on
// stdio: one thread for the process with the agent, the token on every
// runtime call, tools/list from AssembleTools, tools/call through the stream.
func TestMCPCommand(t *testing.T) {
	rt := &mcpRuntime{}
	gs := grpc.NewServer()
	runtimev1.RegisterRuntimeServiceServer(gs, rt)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cmd := newMCPCmd()
	cmd.SetIn(inR)
	cmd.SetOut(outW)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--grpc-addr", "127.0.0.1:1", "--runtime-addr", lis.Addr().String(), "--agent", "researcher", "--token", "tok-1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	rd := bufio.NewReader(outR)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(id int) map[string]any {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading stdout: %v", err)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("stdout is not JSON-RPC: %q", line)
			}
			if v, ok := m["id"].(float64); ok && int(v) == id {
				return m
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	init := recv(1)
	if instr, _ := init["result"].(map[string]any)["instructions"].(string); !strings.Contains(instr, "tool_search") {
		t.Errorf("instructions %q", instr)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	tools := recv(2)["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "tool_search" {
		t.Fatalf("tools/list = %v", tools)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_read_graph","arguments":{}}}`)
	res := recv(3)["result"].(map[string]any)
	if res["isError"] != true || !strings.Contains(res["content"].([]any)[0].(map[string]any)["text"].(string), "call tool_search first") {
		t.Fatalf("tools/call = %v", res)
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("toolplane mcp: %v", err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatal("toolplane mcp did not stop at end of input")
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.agents) != 1 || rt.agents[0] != "researcher" {
		t.Errorf("threads created with agents %v, want one with researcher", rt.agents)
	}
	for _, a := range rt.auths {
		if a != "Bearer tok-1" {
			t.Fatalf("runtime saw authorization %q, want the --token", a)
		}
	}
	if len(rt.calls) != 1 || rt.calls[0] != "t1/memory_read_graph" {
		t.Errorf("calls %v", rt.calls)
	}
}
