package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
)

// TestValidationErrorDetails: the validator's refusal of a bad request is
// INVALID_ARGUMENT with an ErrorInfo of the runtime domain and a
// google.rpc.BadRequest naming the field (proto field names) and a reason.
func TestValidationErrorDetails(t *testing.T) {
	s := &Server{}
	const m = "/toolplane.runtime.v1.RuntimeService/X"
	cases := []struct {
		name  string
		req   any
		field string
		why   string
	}{
		{"get thread without id", &runtimev1.GetThreadRequest{}, "thread_id", grpcx.ViolationRequired},
		{"list threads with a huge page", &runtimev1.ListThreadsRequest{PageSize: 5000}, "page_size", grpcx.ViolationOutOfRange},
		{"create a thread for a bad agent", &runtimev1.CreateThreadRequest{Agent: "Bad_Agent"}, "agent", grpcx.ViolationInvalid},
		{"create a thread with a long metadata value", &runtimev1.CreateThreadRequest{Metadata: map[string]string{"k": strings.Repeat("v", 5000)}}, `metadata["k"]`, grpcx.ViolationTooLong},
		{"assemble invalid UTF-8", &runtimev1.AssembleToolsRequest{ThreadId: "t", UserMessage: "\xff"}, "user_message", grpcx.ViolationInvalidUTF8},
		{"execute without call", &runtimev1.ExecuteToolCallRequest{ThreadId: "t"}, "tool_call", grpcx.ViolationRequired},
		{"stream a call with a long name", &runtimev1.ExecuteToolCallStreamRequest{ThreadId: "t", ToolCall: &runtimev1.ToolCall{Name: strings.Repeat("n", 257)}}, "tool_call.name", grpcx.ViolationTooLong},
		{"get agent without name", &runtimev1.GetAgentRequest{}, "name", grpcx.ViolationRequired},
		{"upsert without agent", &runtimev1.UpsertAgentRequest{}, "agent", grpcx.ViolationRequired},
		{"upsert a bad agent name", &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "NO"}}, "agent.name", grpcx.ViolationInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(m, tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want INVALID_ARGUMENT", status.Code(err), err)
			}
			ei, br := grpcx.ErrorDetails(err)
			if ei.GetDomain() != errorDomain || ei.GetReason() != "ERROR_REASON_INVALID_REQUEST" || ei.GetMetadata()["field"] != tc.field {
				t.Errorf("ErrorInfo %v, want %s/ERROR_REASON_INVALID_REQUEST field %s", ei, errorDomain, tc.field)
			}
			if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetReason() != tc.why || v[0].GetDescription() == "" {
				t.Errorf("BadRequest %v, want field %s reason %s", br, tc.field, tc.why)
			}
		})
	}
}

// TestStoreErrHidesDriverText: a real sqlite failure (the store closed
// under the caller) maps to INTERNAL with ERROR_REASON_INTERNAL and no
// driver text; the driver error is the cause the chain logs.
func TestStoreErrHidesDriverText(t *testing.T) {
	dir := t.TempDir()
	st, err := runtimesqlite.Open(filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, driverErr := st.GetThread(context.Background(), "t1")
	if driverErr == nil {
		t.Fatal("a closed store answered")
	}
	err = storeErr(driverErr)
	ei, _ := grpcx.ErrorDetails(err)
	if status.Code(err) != codes.Internal || ei.GetReason() != "ERROR_REASON_INTERNAL" || ei.GetDomain() != errorDomain {
		t.Fatalf("got %v %v", err, ei)
	}
	msg := status.Convert(err).Message()
	for _, leak := range []string{driverErr.Error(), "sql", "runtime store", dir} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q leaks %q", msg, leak)
		}
	}
	if !errors.Is(grpcx.Cause(err), driverErr) {
		t.Errorf("cause %v, want the driver error", grpcx.Cause(err))
	}
	if c := status.Code(storeErr(context.DeadlineExceeded)); c != codes.DeadlineExceeded {
		t.Errorf("deadline: %v", c)
	}
}

// TestErrorReasonEnumHoldsSharedReasons: the reasons the shared safety net
// uses by name exist in the runtime's ErrorReason enum.
func TestErrorReasonEnumHoldsSharedReasons(t *testing.T) {
	for _, r := range []string{grpcx.ReasonInternal, grpcx.ReasonInvalidRequest, grpcx.ReasonUnspecified} {
		if _, ok := runtimev1.ErrorReason_value[r]; !ok {
			t.Errorf("runtime ErrorReason lacks %s", r)
		}
	}
}
