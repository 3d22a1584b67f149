package runtime_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime"
)

// mcpCalls is the catalog's count of successful tools/call to server
// "everything" in the process serving httpAddr.
func mcpCalls(t *testing.T, httpAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "toolplane_catalog_tool_calls_total{") && strings.Contains(l, `code="OK"`) && strings.Contains(l, `server="everything"`) {
			n, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			return int(n)
		}
	}
	return 0
}

func execCall(ctx context.Context, c runtimev1.RuntimeServiceClient, thread, id, name string, args map[string]any) (*runtimev1.ToolResult, error) {
	a, _ := structpb.NewStruct(args)
	r, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: thread, ToolCall: &runtimev1.ToolCall{Id: id, Name: name, Arguments: a}})
	return r.GetResult(), err
}

// TestExecuteToolCallIdempotent: a retried ExecuteToolCall (same thread,
// same tool_call_id, same call) returns the stored result and the MCP tool
// runs once — also for duplicates sent while the first still executes; a
// reused id with other arguments is refused, naming the field
// (docs/decisions/0082-idempotent-tool-calls.md).
func TestExecuteToolCallIdempotent(t *testing.T) {
	s := startLoopSuite(t, []runtime.ModelConfig{})
	c := s.rt()
	ctx := context.Background()
	th := s.thread(c)
	// A refusal ran no tool and is not stored: the same call (same id)
	// after tool_search runs.
	if r, err := execCall(ctx, c, th, "early", "everything_echo", map[string]any{"message": "early"}); err != nil || r.GetReasonCode() != "deferred.not_promoted" {
		t.Fatalf("deferred call = %v, %v", r, err)
	}
	if _, err := execCall(ctx, c, th, "search-1", "tool_search", map[string]any{"query": "select:everything_echo,everything_trigger-long-running-operation"}); err != nil {
		t.Fatal(err)
	}
	if r, err := execCall(ctx, c, th, "early", "everything_echo", map[string]any{"message": "early"}); err != nil || r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("the refused call retried after tool_search = %v, %v; want it to run", r, err)
	}
	before := mcpCalls(t, s.httpAddr)
	first, err := execCall(ctx, c, th, "echo-1", "everything_echo", map[string]any{"message": "once"})
	if err != nil || first.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("first call = %v, %v", first, err)
	}
	again, err := execCall(ctx, c, th, "echo-1", "everything_echo", map[string]any{"message": "once"})
	if err != nil || !proto.Equal(first, again) {
		t.Fatalf("retry = %v, %v; want the stored %v", again, err, first)
	}
	if n := mcpCalls(t, s.httpAddr) - before; n != 1 {
		t.Fatalf("MCP tool ran %d times for one call id", n)
	}
	// An id reused for another call runs that call (clients numbering
	// calls per turn); a retry of the first still gets the first result.
	other, err := execCall(ctx, c, th, "echo-1", "everything_echo", map[string]any{"message": "twice"})
	if err != nil || !strings.Contains(other.GetContent()[0].GetText(), "twice") {
		t.Fatalf("reused id with other arguments = %v, %v", other, err)
	}
	if again, _ := execCall(ctx, c, th, "echo-1", "everything_echo", map[string]any{"message": "once"}); !proto.Equal(first, again) {
		t.Fatalf("retry after the reuse = %v; want %v", again, first)
	}
	if n := mcpCalls(t, s.httpAddr) - before; n != 2 {
		t.Fatalf("MCP tool ran %d times for two distinct calls", n)
	}
	// Eight duplicates of a 1 s call at once: one runs, all get its result.
	before = mcpCalls(t, s.httpAddr)
	var wg sync.WaitGroup
	res := make([]*runtimev1.ToolResult, 8)
	errs := make([]error, 8)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = execCall(ctx, c, th, "slow-1", "everything_trigger-long-running-operation", map[string]any{"duration": 1, "steps": 1})
		}()
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil || !proto.Equal(res[i], res[0]) || res[0].GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("duplicate %d = %v, %v; first %v", i, res[i], errs[i], res[0])
		}
	}
	if n := mcpCalls(t, s.httpAddr) - before; n != 1 {
		t.Fatalf("8 concurrent duplicates ran the MCP tool %d times", n)
	}
	// The id keys the stored result: bounded, text only.
	for _, bad := range []string{strings.Repeat("x", 257), "a\x00b", "a\nb"} {
		if _, err := execCall(ctx, c, th, bad, "everything_echo", map[string]any{"message": "x"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tool_call.id") {
			t.Fatalf("tool_call.id %q = %v; want INVALID_ARGUMENT naming tool_call.id", bad, err)
		}
	}
	// The thread holds one tool message per call id.
	ms, err := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, m := range ms.GetMessages() {
		if m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
			per[m.GetToolCallId()]++
		}
	}
	if per["echo-1"] != 2 || per["slow-1"] != 1 || per["early"] != 2 { // echo-1: the call and the distinct reuse
		t.Fatalf("tool messages per call id: %v", per)
	}
}
