//go:build e2e

// Package e2e holds the end-to-end acceptance tests of issue 2 (the
// toolplane binary, topology, shutdown, config errors, identity and trust),
// run against the real binary built with `-tags e2e` by internal/testkit.
//
// Run: CGO_ENABLED=1 go test -race -tags e2e ./tests/e2e/...
package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the PostgreSQL cluster of postgres_test.go, if one was started
	testkit.Cleanup()
	os.Exit(code)
}

// Full method names used across the tests. The test-only service is
// compiled into the binary by cmd/toolplane/testonly_e2e.go.
const (
	mSleep         = "/toolplane.testonly.v1.SleepService/Sleep"
	mWhoAmI        = "/toolplane.testonly.v1.SleepService/WhoAmI"
	mPanic         = "/toolplane.testonly.v1.SleepService/Panic"
	mListTools     = "/toolplane.catalog.v1.CatalogService/ListTools"     // class service
	mReloadServers = "/toolplane.catalog.v1.CatalogService/ReloadServers" // class admin
	mListPolicies  = "/toolplane.authz.v1.AuthzService/ListPolicies"      // class admin
	mCreateThread  = "/toolplane.runtime.v1.RuntimeService/CreateThread"  // class public
	mListThreads   = "/toolplane.runtime.v1.RuntimeService/ListThreads"   // class public

	actingForKey = "toolplane-acting-for"
)

// sha256Hex is the lowercase hex SHA-256 of s, as auth.tokens[].sha256 wants it.
func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// outgoing returns a context carrying `authorization: Bearer token` (when
// token is non-empty) and the extra metadata pairs.
func outgoing(ctx context.Context, token string, kv ...string) context.Context {
	if token != "" {
		kv = append(kv, "authorization", "Bearer "+token)
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// invoke calls a unary method with a proto request and returns the status code.
func invoke(t *testing.T, conn *grpc.ClientConn, method, token string, req, resp proto.Message, kv ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if req == nil {
		req = &emptypb.Empty{}
	}
	if resp == nil {
		resp = &emptypb.Empty{}
	}
	return conn.Invoke(outgoing(ctx, token, kv...), method, req, resp)
}

// rawCodec sends *[]byte as the request body untouched (a malformed
// protobuf), under the "proto" content subtype.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, fmt.Errorf("rawCodec: %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return fmt.Errorf("rawCodec: %T", v)
}

func (rawCodec) Name() string { return "proto" }

// malformedProto is not a valid protobuf message: a field with wire type 7.
var malformedProto = []byte{0x0f, 0xff, 0xff, 0xff}

// invokeRaw sends body as the raw request of method.
func invokeRaw(t *testing.T, conn *grpc.ClientConn, method, token string, body []byte, kv ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []byte
	return conn.Invoke(outgoing(ctx, token, kv...), method, &body, &out, grpc.ForceCodec(rawCodec{}))
}

// whoAmI calls the test-only WhoAmI and returns its fields.
func whoAmI(t *testing.T, conn *grpc.ClientConn, token string, kv ...string) (map[string]any, error) {
	t.Helper()
	var out structpb.Struct
	if err := invoke(t, conn, mWhoAmI, token, nil, &out, kv...); err != nil {
		return nil, err
	}
	return out.AsMap(), nil
}

// restResult is an HTTP response with its decoded JSON body.
type restResult struct {
	Status int
	Body   map[string]any
	Raw    string
}

// rest performs an HTTP request against the process's HTTP listener.
func rest(t *testing.T, p *testkit.Process, method, path, token, body string, headers ...string) restResult {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.URL(path), r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := p.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	res := restResult{Status: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &res.Body)
	return res
}

// httpStatus is the REST mirror's status for a gRPC code (grpc-gateway's mapping).
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// wantCode fails t unless err has code want.
func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: code %s, want %s (error: %v)", what, got, want, err)
	}
}

// notDenied fails t when err is UNAUTHENTICATED or PERMISSION_DENIED: the
// call passed authentication and the class check (what the handler then
// answers is its own business).
func notDenied(t *testing.T, what string, err error) {
	t.Helper()
	if c := status.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
		t.Errorf("%s: refused with %s, want it admitted (error: %v)", what, c, err)
	}
}

// stringsOf converts a decoded JSON list to []string.
func stringsOf(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}
