package catalog

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
)

// TestValidationErrorDetails: bad requests answer INVALID_ARGUMENT with an
// ErrorInfo of the catalog domain and a google.rpc.BadRequest naming the
// field (proto field names) and a reason, whether the validator or the
// handler refuses them.
func TestValidationErrorDetails(t *testing.T) {
	h := start(t, extJSON(), nil)
	ctx := ctxT(t)
	long := strings.Repeat("q", maxQueryBytes+1)
	cases := []struct {
		name   string
		call   func() error
		reason string
		field  string
		why    string
	}{
		{"get tool without name", func() error {
			_, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "name", grpcx.ViolationRequired},
		{"search with a long query", func() error {
			_, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: long})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "query", grpcx.ViolationTooLong},
		{"search with an unknown mode", func() error {
			_, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "x", Mode: 99})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "mode", grpcx.ViolationUnknownValue},
		{"stream call without name", func() error {
			st, err := h.svc.CallToolStream(ctx, &catalogv1.CallToolStreamRequest{})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "name", grpcx.ViolationRequired},
		{"call with a negative timeout", func() error {
			_, err := h.svc.CallTool(ctx, &catalogv1.CallToolRequest{Name: "x", Timeout: &durationpb.Duration{Seconds: -1}})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "timeout", grpcx.ViolationOutOfRange},
		{"list with a negative page size", func() error {
			_, err := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{PageSize: -1})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "page_size", grpcx.ViolationOutOfRange},
		{"list with a forged page token (handler)", func() error {
			_, err := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{PageToken: "!!"})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "page_token", grpcx.ViolationInvalid},
		{"update without server", func() error {
			_, err := h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "fx"})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "server", grpcx.ViolationRequired},
		{"replace with an unnamed server", func() error {
			_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{{Name: "a", Command: "node"}, {}}})
			return err
		}, "ERROR_REASON_INVALID_REQUEST", "servers[1].name", grpcx.ViolationRequired},
		{"replace with a bad server name (handler)", func() error {
			_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{{Name: "bad name", Command: "node"}}})
			return err
		}, "ERROR_REASON_INVALID_SERVER_CONFIG", "servers[0].name", grpcx.ViolationInvalid},
		{"replace with a refused command (handler)", func() error {
			_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{{Name: "fx", Command: "/bin/sh"}}})
			return err
		}, "ERROR_REASON_INVALID_SERVER_CONFIG", "servers[0].command", grpcx.ViolationInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if codeOf(err) != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want INVALID_ARGUMENT", codeOf(err), err)
			}
			ei, br := grpcx.ErrorDetails(err)
			if ei.GetDomain() != errorDomain || ei.GetReason() != tc.reason {
				t.Errorf("ErrorInfo %v, want %s/%s", ei, errorDomain, tc.reason)
			}
			if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetReason() != tc.why || v[0].GetDescription() == "" {
				t.Errorf("BadRequest %v, want field %s reason %s", br, tc.field, tc.why)
			}
		})
	}
}

// TestConfigFailureHidesPath: extensions_config.json turning unreadable
// under the server answers FAILED_PRECONDITION with
// ERROR_REASON_CONFIG_UNAVAILABLE and no file path or parser text.
func TestConfigFailureHidesPath(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	if err := os.WriteFile(h.path, []byte(`{"mcpServers": {"fx": `), 0o600); err != nil {
		t.Fatal(err)
	}
	f := false
	_, err := h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "fx", Server: &catalogv1.ServerUpdate{Enabled: &f}})
	if codeOf(err) != codes.FailedPrecondition || reasonOf(err) != "ERROR_REASON_CONFIG_UNAVAILABLE" {
		t.Fatalf("got %v, want FAILED_PRECONDITION CONFIG_UNAVAILABLE", err)
	}
	for _, leak := range []string{h.path, "extensions_config.json", "unexpected end", "EOF"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("message %q leaks %q", err.Error(), leak)
		}
	}
	_, err = h.admin.ReloadServers(ctx, &catalogv1.ReloadServersRequest{})
	if codeOf(err) != codes.FailedPrecondition || strings.Contains(err.Error(), h.path) {
		t.Fatalf("reload: %v", err)
	}
}

// TestErrorReasonEnumHoldsSharedReasons: the reasons the shared safety net
// uses by name exist in the catalog ErrorReason enum.
func TestErrorReasonEnumHoldsSharedReasons(t *testing.T) {
	for _, r := range []string{grpcx.ReasonInternal, grpcx.ReasonInvalidRequest, grpcx.ReasonUnspecified} {
		if _, ok := catalogv1.ErrorReason_value[r]; !ok {
			t.Errorf("catalog ErrorReason lacks %s", r)
		}
	}
}
