package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

func nested(depth int) string {
	return `{"a":` + strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth) + `}`
}

// Bounded cost (docs/architecture.md §5): each limit answers
// INVALID_ARGUMENT naming its key before any decoding, decision or tool
// run; inside a tool call (the agent loop, the workspace) the call is
// refused with a text naming the key and nothing is written.
func TestLimitsHostileCases(t *testing.T) {
	cfg := Config{Limits: LimitsConfig{ToolArguments: ToolArgumentLimits{MaxBytes: 64 << 10, MaxDepth: 8, MaxElements: 1000}, MessageMaxBytes: 1 << 10,
		Workspace: WorkspaceLimits{FileMaxBytes: 4 << 10, ThreadQuotaBytes: 10 << 10}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, st, az := fakeUpstreamServer(t, cfg)
	ctx := context.Background()
	th, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	many := `{"a":[` + strings.TrimSuffix(strings.Repeat(`1,`, 1001), ",") + `]}`
	deepPB, _ := structpb.NewStruct(map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": map[string]any{"f": map[string]any{"g": map[string]any{"h": map[string]any{"i": 1}}}}}}}}})
	call := func(raw string, pb *structpb.Struct) *runtimev1.ExecuteToolCallRequest {
		return &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "c1", Name: "write_file", RawArguments: raw, Arguments: pb}}
	}
	cases := []struct {
		name, limit string
		req         any
	}{
		{"raw_arguments over max_bytes", "runtime.limits.tool_arguments.max_bytes", call(`{"path":"/mnt/user-data/workspace/x","content":"`+strings.Repeat("x", 70<<10)+`"}`, nil)},
		{"raw_arguments deeper than max_depth", "runtime.limits.tool_arguments.max_depth", call(nested(9), nil)},
		{"raw_arguments with more than max_elements values", "runtime.limits.tool_arguments.max_elements", call(many, nil)},
		{"Struct arguments deeper than max_depth", "runtime.limits.tool_arguments.max_depth", call("", deepPB)},
		{"user_message over message_max_bytes", "runtime.limits.message_max_bytes", &runtimev1.AssembleToolsRequest{ThreadId: id, UserMessage: strings.Repeat("m", 2<<10)}},
		{"RunTurn message over message_max_bytes", "runtime.limits.message_max_bytes", &runtimev1.RunTurnRequest{ThreadId: id, Message: strings.Repeat("m", 2<<10)}},
		{"ResumeRun answer over message_max_bytes", "runtime.limits.message_max_bytes", &runtimev1.ResumeRunRequest{ThreadId: id, RunId: "r", Answer: strings.Repeat("m", 2<<10)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := az.AuthorizeCalls.Load() + az.Filters.Load()
			err := s.Validate("", tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err %v, want INVALID_ARGUMENT", err)
			}
			if ei, br := grpcx.ErrorDetails(err); ei.GetMetadata()["limit"] != tc.limit || len(br.GetFieldViolations()) != 1 || !strings.Contains(err.Error(), tc.limit) {
				t.Errorf("error does not name %s: %v (%v)", tc.limit, err, ei)
			}
			if after := az.AuthorizeCalls.Load() + az.Filters.Load(); after != before {
				t.Errorf("authz asked")
			}
		})
	}
	// Within the bounds: served.
	if err := s.Validate("", call(nested(7), nil)); err != nil {
		t.Fatalf("depth 8: %v", err)
	}

	// The agent loop's calls skip the RPC validation: the input_budget step
	// refuses them before decoding and authorization.
	before := az.AuthorizeCalls.Load()
	res, err := loopAdapter{s}.Execute(ctx, id, "", runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, &runtimev1.ToolCall{Id: "l1", Name: "write_file", RawArguments: nested(20)}, nil)
	if err != nil || res.GetReasonCode() != "input_budget.exceeded" || !strings.Contains(text0(res), "runtime.limits.tool_arguments.max_depth") {
		t.Fatalf("loop call over max_depth: %v %v", res, err)
	}
	if az.AuthorizeCalls.Load() != before {
		t.Errorf("authz asked for a refused call")
	}

	// The workspace: one file over file_max_bytes, then the quota.
	file := func(name string) string { return filepath.Join(s.ws.ThreadDir(id), "user-data", "workspace", name) }
	write := func(name string, n int, appendMode bool) *runtimev1.ToolResult {
		a, _ := structpb.NewStruct(map[string]any{"path": "/mnt/user-data/workspace/" + name, "content": strings.Repeat("w", n), "append": appendMode})
		r, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "w-" + name, Name: "write_file", Arguments: a}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResult()
	}
	if r := write("big", 5<<10, false); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || !strings.Contains(text0(r), "runtime.limits.workspace.file_max_bytes") {
		t.Fatalf("file over file_max_bytes: %v", r)
	}
	if _, err := os.Stat(file("big")); !os.IsNotExist(err) {
		t.Errorf("the refused file exists: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		if r := write(n, 4<<10, false); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("write %s: %v", n, r)
		}
	}
	if r := write("c", 3<<10, false); !strings.Contains(text0(r), "runtime.limits.workspace.thread_quota_bytes") {
		t.Fatalf("write over the quota: %v", r)
	}
	if _, err := os.Stat(file("c")); !os.IsNotExist(err) {
		t.Errorf("the over-quota file exists")
	}
	ra, _ := structpb.NewStruct(map[string]any{"path": "/mnt/user-data/workspace/a"})
	if _, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: "r-a", Name: "read_file", Arguments: ra}}); err != nil {
		t.Fatal(err)
	}
	if r := write("a", 1<<10, true); !strings.Contains(text0(r), "file_max_bytes") {
		t.Fatalf("append past file_max_bytes: %v", r)
	}
	// Rewriting a file counts its new size, not both.
	if r := write("a", 2<<10, false); r.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("rewrite within the quota: %v", r)
	}
	_ = st
	_ = runtimestore.Page{}
}

func text0(r *runtimev1.ToolResult) string {
	if len(r.GetContent()) == 0 {
		return ""
	}
	return r.GetContent()[0].GetText()
}
