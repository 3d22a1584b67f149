//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestMaxMessageSize: server.max_message_bytes bounds what the server
// accepts (RESOURCE_EXHAUSTED), over gRPC and through the gateway's dial.
func TestMaxMessageSize(t *testing.T) {
	// server.http.max_body_bytes (default 1 MiB) would refuse the REST body
	// below before the gateway's dial sees it; raised so that the dial's
	// own limit is what is tested here (the body bounds: tests/hostile).
	// catalog.max_definition_bytes must stay within a quarter of the message limit.
	p := testkit.Start(t, testkit.Options{Config: "server:\n  max_message_bytes: 1048576\n  http:\n    max_body_bytes: 8388608\ncatalog:\n  max_definition_bytes: 262144\n"})
	conn := p.Dial(t, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	// An Empty message followed by an unknown field of 2 MiB: well-formed,
	// but over the limit.
	big := append([]byte{0x0a, 0x80, 0x80, 0x80, 0x01}, bytes.Repeat([]byte{'x'}, 2<<20)...)
	err := invokeRaw(t, conn, mWhoAmI, "", big)
	wantCode(t, "2 MiB request with a 1 MiB limit", err, codes.ResourceExhausted)
	// Under the limit it passes.
	small := append([]byte{0x0a, 0x80, 0x80, 0x10}, bytes.Repeat([]byte{'x'}, 256<<10)...)
	if err := invokeRaw(t, conn, mWhoAmI, "", small); err != nil {
		t.Errorf("256 KiB request with a 1 MiB limit: %v", err)
	}
	// REST: the gateway's dial has the same limit.
	body := `{"metadata": {"k": "` + strings.Repeat("x", 2<<20) + `"}}`
	r := rest(t, p, http.MethodPost, "/v1/threads", "", body)
	if c, _ := r.Body["code"].(float64); codes.Code(c) != codes.ResourceExhausted {
		t.Errorf("REST 2 MiB body: HTTP %d, body %.200s; want code RESOURCE_EXHAUSTED", r.Status, r.Raw)
	}
}

// TestRequestID: the request id sent by the caller comes back (gRPC header
// and HTTP X-Request-Id); without one, the server makes one up.
func TestRequestID(t *testing.T) {
	p := testkit.Start(t, testkit.Options{})
	conn := p.Dial(t)
	var hdr metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "e2e-req-42")
	if err := conn.Invoke(ctx, mWhoAmI, &emptypb.Empty{}, &structpb.Struct{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get("x-request-id"); len(got) != 1 || got[0] != "e2e-req-42" {
		t.Errorf("gRPC x-request-id header: %v", got)
	}
	hdr = nil
	if err := conn.Invoke(context.Background(), mWhoAmI, &emptypb.Empty{}, &structpb.Struct{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get("x-request-id"); len(got) != 1 || len(got[0]) < 8 {
		t.Errorf("generated x-request-id: %v", got)
	}
	// Through the gateway: a generated route and the test-only one.
	for _, path := range []string{"/v1/threads", "/v1/testonly/whoami"} {
		req, _ := http.NewRequest(http.MethodGet, p.URL(path), nil)
		req.Header.Set("X-Request-Id", "e2e-rest-7")
		resp, err := p.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Request-Id"); got != "e2e-rest-7" {
			t.Errorf("REST %s X-Request-Id: %q (HTTP %d)", path, got, resp.StatusCode)
		}
	}
}

// TestEnvAndFlagsAtTheBinary: environment variables configure the process
// (JSON logs, debug level), and flags beat them (the listener addresses
// given by flags win over TOOLPLANE_SERVER_GRPC_ADDR).
func TestEnvAndFlagsAtTheBinary(t *testing.T) {
	p := testkit.Start(t, testkit.Options{Env: []string{
		"TOOLPLANE_SERVER_LOG_FORMAT=json",
		"TOOLPLANE_SERVER_LOG_LEVEL=debug",
		"TOOLPLANE_SERVER_GRPC_ADDR=127.0.0.1:1", // the --grpc-addr flag wins
		"TOOLPLANE_SERVER_DRAIN_PERIOD=10ms",
	}})
	if _, err := whoAmI(t, p.Dial(t), ""); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "debug rpc log line", func() error {
		if !strings.Contains(p.Stderr(), `"method":"/toolplane.testonly.v1.SleepService/WhoAmI"`) {
			return errString("no JSON rpc line for WhoAmI")
		}
		return nil
	})
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Stderr()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON log line: %q", line)
			continue
		}
		if m["msg"] == "serving" && m["grpc"] != p.GRPCAddr {
			t.Errorf("serving on %v, want the flag's %s", m["grpc"], p.GRPCAddr)
		}
		n++
	}
	if n < 3 {
		t.Errorf("only %d log lines", n)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
