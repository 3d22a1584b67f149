package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
)

// recordingRuntime records which RPCs the gateway reached.
type recordingRuntime struct {
	runtimev1.UnimplementedRuntimeServiceServer
	mu    sync.Mutex
	calls []string
}

func (s *recordingRuntime) record(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, what)
}

func (s *recordingRuntime) reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *recordingRuntime) GetThread(_ context.Context, r *runtimev1.GetThreadRequest) (*runtimev1.GetThreadResponse, error) {
	s.record("GetThread " + r.GetThreadId())
	return &runtimev1.GetThreadResponse{}, nil
}

func (s *recordingRuntime) AssembleTools(_ context.Context, r *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	s.record("AssembleTools " + r.GetThreadId())
	return &runtimev1.AssembleToolsResponse{}, nil
}

type liveProbe struct{}

func (liveProbe) Live(context.Context) bool              { return true }
func (liveProbe) Ready(context.Context) map[string]error { return map[string]error{} }

// startGateway serves the real gateway (every generated route of the four
// services) in front of a gRPC server on loopback.
func startGateway(t *testing.T, opts ...runtime.ServeMuxOption) (*httptest.Server, *recordingRuntime) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt := &recordingRuntime{}
	gs := grpc.NewServer()
	runtimev1.RegisterRuntimeServiceServer(gs, rt)
	catalogv1.RegisterCatalogServiceServer(gs, catalogv1.UnimplementedCatalogServiceServer{})
	authzv1.RegisterAuthzServiceServer(gs, authzv1.UnimplementedAuthzServiceServer{})
	skillsv1.RegisterSkillsServiceServer(gs, skillsv1.UnimplementedSkillsServiceServer{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	mux := NewMux(opts...)
	ctx := context.Background()
	for _, reg := range []func(context.Context) error{
		func(ctx context.Context) error { return runtimev1.RegisterRuntimeServiceHandler(ctx, mux, conn) },
		func(ctx context.Context) error { return catalogv1.RegisterCatalogServiceHandler(ctx, mux, conn) },
		func(ctx context.Context) error { return authzv1.RegisterAuthzServiceHandler(ctx, mux, conn) },
		func(ctx context.Context) error { return skillsv1.RegisterSkillsServiceHandler(ctx, mux, conn) },
	} {
		if err := reg(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Handler(mux, liveProbe{}, prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	return srv, rt
}

type errBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type            string `json:"@type"`
		FieldViolations []struct {
			Field       string `json:"field"`
			Description string `json:"description"`
			Reason      string `json:"reason"`
		} `json:"field_violations"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	} `json:"details"`
}

func do(t *testing.T, srv *httptest.Server, method, path, body string) (*http.Response, errBody) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var eb errBody
	_ = json.Unmarshal(raw, &eb)
	return resp, eb
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	srv, rt := startGateway(t)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/tools:search", "POST"},
		{"DELETE", "/v1/threads", "GET, POST"},
		{"POST", "/v1/threads/t1", "GET, DELETE"},
		{"PATCH", "/v1/agents/default", "GET, PUT, DELETE"},
		{"GET", "/v1/threads/t1:assemble", ""}, // ':' in the GetThread id: 400 below, not 405
		{"PUT", "/v1/threads/t1:assemble", "POST"},
		{"PUT", "/v1/skills/s1/files/a/b.md", "GET"},
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/openapi.json", "GET, HEAD"},
	} {
		resp, eb := do(t, srv, c.method, c.path, "")
		if c.allow == "" {
			continue
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q (%s)", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow, eb.Message)
		}
		if eb.Code != 12 || !strings.Contains(eb.Message, c.allow) {
			t.Errorf("%s %s: body code %d message %q; want code 12 naming %q", c.method, c.path, eb.Code, eb.Message, c.allow)
		}
		var info string
		for _, d := range eb.Details {
			if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Domain == ErrorDomain {
				info = d.Metadata["allow"]
			}
		}
		if info != c.allow {
			t.Errorf("%s %s: ErrorInfo metadata allow %q, want %q (%+v)", c.method, c.path, info, c.allow, eb.Details)
		}
	}
	if got := rt.reached(); len(got) != 0 {
		t.Errorf("wrong-method calls reached RPCs: %v", got)
	}
	// An unknown path stays 404.
	if resp, _ := do(t, srv, "GET", "/v1/nope", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/nope: %d, want 404", resp.StatusCode)
	}
}

func TestColonInPathVariableIs400(t *testing.T) {
	srv, rt := startGateway(t)
	resp, eb := do(t, srv, "GET", "/v1/threads/abc:assemble", "")
	if resp.StatusCode != http.StatusBadRequest || eb.Code != 3 {
		t.Fatalf("GET /v1/threads/abc:assemble: %d code %d (%s); want 400 INVALID_ARGUMENT", resp.StatusCode, eb.Code, eb.Message)
	}
	if !strings.HasPrefix(eb.Message, "thread_id: must not contain ':'") || !strings.Contains(eb.Message, "served for POST") {
		t.Errorf("message %q: want the field named and the method that serves the path", eb.Message)
	}
	var field, reason string
	for _, d := range eb.Details {
		switch d.Type {
		case "type.googleapis.com/google.rpc.BadRequest":
			if len(d.FieldViolations) == 1 && d.FieldViolations[0].Reason == "INVALID" {
				field = d.FieldViolations[0].Field
			}
		case "type.googleapis.com/google.rpc.ErrorInfo":
			reason = d.Reason
		}
	}
	if field != "thread_id" || reason != "ERROR_REASON_INVALID_REQUEST" {
		t.Errorf("details %+v: want a google.rpc.BadRequest (INVALID) for thread_id and ErrorInfo ERROR_REASON_INVALID_REQUEST", eb.Details)
	}
	// Percent-encoded ':' is the same id.
	if resp, _ := do(t, srv, "GET", "/v1/threads/abc%3Aassemble", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /v1/threads/abc%%3Aassemble: %d, want 400", resp.StatusCode)
	}
	// A ':' in a nested variable, with a verb no route has.
	if resp, eb := do(t, srv, "GET", "/v1/skills/s:1/history", ""); resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(eb.Message, "name: ") {
		t.Errorf("GET /v1/skills/s:1/history: %d %q, want 400 naming name", resp.StatusCode, eb.Message)
	}
	// The routes themselves still work.
	if resp, eb := do(t, srv, "GET", "/v1/threads/abc", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/threads/abc: %d %s", resp.StatusCode, eb.Message)
	}
	if resp, eb := do(t, srv, "POST", "/v1/threads/abc:assemble", "{}"); resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/threads/abc:assemble: %d %s", resp.StatusCode, eb.Message)
	}
	got := strings.Join(rt.reached(), "; ")
	if got != "GetThread abc; AssembleTools abc" {
		t.Errorf("RPCs reached: %q, want only GetThread abc then AssembleTools abc", got)
	}
}

// TestRoutingErrorsWithCredentials: with authentication on, an anonymous
// caller gets 401 before its ':' id is judged; a wrong method is 405 for
// anyone (routes are public in /openapi.json).
func TestRoutingErrorsWithCredentials(t *testing.T) {
	sum := sha256.Sum256([]byte("tp-test-token"))
	au, err := auth.NewAuthenticator(auth.Options{Enabled: true, Tokens: []auth.TokenSpec{{
		Name: "t", SHA256: hex.EncodeToString(sum[:]), Kind: auth.KindUser, Principal: &typev1.Principal{Subject: "alice"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, rt := startGateway(t, RequireCredential(au))
	if resp, eb := do(t, srv, "GET", "/v1/threads/abc:assemble", ""); resp.StatusCode != http.StatusUnauthorized || eb.Code != 16 {
		t.Errorf("anonymous GET /v1/threads/abc:assemble: %d code %d, want 401 code 16", resp.StatusCode, eb.Code)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/threads/abc:assemble", nil)
	req.Header.Set("Authorization", "Bearer tp-test-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /v1/threads/abc:assemble with a token: %d, want 400", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "PUT", "/v1/tools:search", ""); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("anonymous PUT /v1/tools:search: %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if got := rt.reached(); len(got) != 0 {
		t.Errorf("RPCs reached: %v", got)
	}
}
