// Package hostile attacks the whole suite (all four services of one
// process, auth on, a real npm MCP server) over gRPC, REST and the MCP
// front door, one table per trust boundary of docs/architecture.md §5.
// Every case asserts the refusal and that nothing ran: the memory server's
// file is never written (no MCP call), no file appears in a thread, no
// decision is recorded for a principal the caller is not.
package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/testkit"
)

const (
	aliceTok   = "alice-token-0123456789"
	malloryTok = "mallory-token-0123456789"
	floodTok   = "flood-token-0123456789"
	svcTok     = "svc-token-0123456789"
	adminTok   = "admin-token-0123456789"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

type suite struct {
	grpcAddr, httpURL, mcpURL, memFile, dataDir string
	conns                                       map[string]*grpc.ClientConn
}

func start(t *testing.T) *suite {
	t.Helper()
	memory := testkit.NPMServer(t, "server-memory")
	dir := t.TempDir()
	s := &suite{memFile: filepath.Join(dir, "memory.jsonl"), conns: map[string]*grpc.ClientConn{}}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"memory": map[string]any{"command": "node", "args": []string{memory}, "env": map[string]string{"MEMORY_FILE_PATH": s.memFile}},
	}})
	extPath, policy := filepath.Join(dir, "extensions_config.json"), filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(extPath, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	// Users may do everything except create memory entities, which only a
	// subagent may (a deny applies when its condition fails).
	if err := os.WriteFile(policy, []byte("p, user, *, *, *, *, allow\n"+
		"p, user, *, tool, memory_create_entities, call, deny, subagent\n"+
		"p, flood, *, *, *, *, allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := app.DefaultConfig()
	s.dataDir = filepath.Join(dir, "data")
	cfg.Server.DataDir = s.dataDir
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod, cfg.Server.ShutdownTimeout = time.Millisecond, 5*time.Second
	cfg.Server.HTTP.ToolCallMaxBodyBytes = 64 << 10
	cfg.Server.HTTP.MCPMaxBodyBytes = 64 << 10
	cfg.Server.RateLimits = append(config.DefaultRateLimits(), config.RateLimit{Role: "flood", DecisionsPerSecond: 0.5, DecisionsBurst: 3, WritesPerSecond: 0.5, WritesBurst: 5})
	cfg.Catalog.ExtensionsConfig = extPath
	cfg.Authz.PolicyFile = policy
	cfg.Runtime.ToolSearch.ExemptServers = []string{"memory"}
	cfg.Runtime.Limits.ToolArguments.MaxDepth = 16
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "alice", SHA256: sha(aliceTok), Kind: "user", Subject: "alice", Tenant: "default", Roles: []string{"user"}},
		{Name: "mallory", SHA256: sha(malloryTok), Kind: "user", Subject: "mallory", Tenant: "default", Roles: []string{"user"}},
		{Name: "flood", SHA256: sha(floodTok), Kind: "user", Subject: "flooder", Tenant: "default", Roles: []string{"flood"}},
		{Name: "svc", SHA256: sha(svcTok), Kind: "service", Subject: "svc:gateway", Tenant: "default", Roles: []string{"service"}},
		{Name: "admin", SHA256: sha(adminTok), Kind: "user", Subject: "root", Tenant: "default", Roles: []string{"admin"}},
	}
	if err := os.MkdirAll(cfg.Server.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.grpcAddr, s.httpURL = lis.GRPC.Addr().String(), "http://"+lis.HTTP.Addr().String()
	s.mcpURL = s.httpURL + "/mcp"
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan error, 1), make(chan struct{})
	var once sync.Once
	go func() {
		done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnReady: func(string, string) { once.Do(func() { close(ready) }) }})
	}()
	t.Cleanup(func() {
		for _, c := range s.conns {
			_ = c.Close()
		}
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("suite did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("suite stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("suite not ready")
	}
	cat := catalogv1.NewCatalogServiceClient(s.conn(t, adminTok))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := cat.ListServers(context.Background(), &catalogv1.ListServersRequest{})
		if err == nil && len(res.GetServers()) == 1 && res.GetServers()[0].GetState() == catalogv1.ServerState_SERVER_STATE_READY {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory server not ready: %v %v", res, err)
		}
	}
	return s
}

func (s *suite) conn(t *testing.T, tok string) *grpc.ClientConn {
	t.Helper()
	if c, ok := s.conns[tok]; ok {
		return c
	}
	c, err := grpcx.Dial(s.grpcAddr, grpcx.DialOptions{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	s.conns[tok] = c
	return c
}

func (s *suite) rt(t *testing.T, tok string) runtimev1.RuntimeServiceClient {
	return runtimev1.NewRuntimeServiceClient(s.conn(t, tok))
}

// decisions is the number of decisions in the audit log.
func (s *suite) decisions(t *testing.T) int {
	t.Helper()
	az := authzv1.NewAuthzServiceClient(s.conn(t, adminTok))
	n, tok := 0, ""
	for {
		res, err := az.ListDecisions(context.Background(), &authzv1.ListDecisionsRequest{PageSize: 1000, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.GetDecisions())
		if tok = res.GetNextPageToken(); tok == "" {
			return n
		}
	}
}

func (s *suite) memoryWritten() bool {
	fi, err := os.Stat(s.memFile)
	return err == nil && fi.Size() > 0
}

func createArgs(t *testing.T) *structpb.Struct {
	a, err := structpb.NewStruct(map[string]any{"entities": []any{map[string]any{"name": "x", "entityType": "t", "observations": []any{"o"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newThread(t *testing.T, rt runtimev1.RuntimeServiceClient) string {
	t.Helper()
	res, err := rt.CreateThread(context.Background(), &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetThread().GetThreadId()
}

func reason(err error) string {
	ei, _ := grpcx.ErrorDetails(err)
	return ei.GetReason()
}

type httpCase struct {
	method, path, body string
	chunked            bool
	headers            map[string]string
}

func (s *suite) do(t *testing.T, base string, hc httpCase) (int, http.Header, string) {
	t.Helper()
	var body io.Reader = strings.NewReader(hc.body)
	if hc.chunked {
		body = io.MultiReader(strings.NewReader(hc.body)) // no Len: sent chunked
	}
	req, err := http.NewRequest(hc.method, base+hc.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if hc.body == "" {
		req.Body = nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hc.headers {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestHostileCases is the hostile-case table of docs/architecture.md §5.
func TestHostileCases(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	alice, mallory := s.rt(t, aliceTok), s.rt(t, malloryTok)
	aliceThread, malloryThread := newThread(t, alice), newThread(t, mallory)
	root := &typev1.Principal{Subject: "root", Tenant: "default", Roles: []string{"admin"}}
	exec := func(rt runtimev1.RuntimeServiceClient, thread, run string, raw string, md ...string) error {
		tc := &runtimev1.ToolCall{Id: "h1", Name: "memory_create_entities", RawArguments: raw}
		if raw == "" {
			tc.Arguments = createArgs(t)
		}
		_, err := rt.ExecuteToolCall(metadata.AppendToOutgoingContext(ctx, md...), &runtimev1.ExecuteToolCallRequest{ThreadId: thread, RunId: run, ToolCall: tc})
		return err
	}

	// Failed logins first (so the bad tokens of the table below fall in the
	// same window and are not recorded again): 20 bad tokens on each of
	// gRPC, REST and /mcp give one decision per surface and source, of
	// resource type credential, and no more.
	t.Run("audit/failed logins recorded once per window per source", func(t *testing.T) {
		bad := s.rt(t, "tp-not-a-token")
		for i := range 20 {
			if _, err := bad.ListThreads(ctx, &runtimev1.ListThreadsRequest{}); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("gRPC bad token: %v", err)
			}
			if code, _, _ := s.do(t, s.httpURL, httpCase{method: "GET", path: "/v1/threads", headers: bearer(fmt.Sprintf("tp-bad-%d", i))}); code != 401 {
				t.Fatalf("REST bad token: %d", code)
			}
			if code, _, _ := s.do(t, s.mcpURL, httpCase{method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: bearer("tp-bad")}); code != 401 {
				t.Fatalf("/mcp bad token: %d", code)
			}
		}
		az := authzv1.NewAuthzServiceClient(s.conn(t, adminTok))
		creds := func() []*authzv1.DecisionRecord {
			res, err := az.ListDecisions(ctx, &authzv1.ListDecisionsRequest{PageSize: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var out []*authzv1.DecisionRecord
			for _, d := range res.GetDecisions() {
				if d.GetResourceType() == authzv1.ResourceType_RESOURCE_TYPE_CREDENTIAL {
					out = append(out, d)
				}
			}
			return out
		}
		var got []*authzv1.DecisionRecord
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got = creds(); len(got) >= 3 {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
		got = creds()
		surfaces := map[string]bool{}
		for _, d := range got {
			surfaces[strings.Fields(d.GetTarget())[0]] = true
			if d.GetAllow() || len(d.GetReasons()) != 1 || d.GetReasons()[0].GetCode() != "auth.credential_invalid" || strings.Contains(d.GetReasons()[0].GetMessage(), "tp-bad") {
				t.Errorf("record: %v", d)
			}
		}
		if len(got) != 3 || !surfaces["grpc"] || !surfaces["rest"] || !surfaces["mcp"] {
			t.Fatalf("60 failed logins gave %d credential records (surfaces %v), want one per surface", len(got), surfaces)
		}
	})

	type grpcCase struct {
		class, name string
		run         func() error
		code        codes.Code
		reason      string
	}
	grpcCases := []grpcCase{
		{"call context", "ExecuteToolCall on another principal's thread", func() error { return exec(alice, malloryThread, "", "") }, codes.NotFound, "ERROR_REASON_THREAD_NOT_FOUND"},
		{"call context", "ExecuteToolCall naming an invented run", func() error { return exec(alice, aliceThread, "run-invented", "") }, codes.NotFound, "ERROR_REASON_RUN_NOT_FOUND"},
		{"structured identity", "user credential sends toolplane-principal-bin naming an admin", func() error {
			return exec(alice, aliceThread, "", "", auth.PrincipalHeader, string(auth.EncodePrincipal(root)))
		}, codes.PermissionDenied, auth.ReasonActingForForbidden},
		{"structured identity", "user credential sends v0.1.x acting-for", func() error {
			return exec(alice, aliceThread, "", "", auth.ActingForHeader, "default/root;roles=admin")
		}, codes.PermissionDenied, auth.ReasonActingForForbidden},
		{"structured identity", "service credential, acting-for value with '=' in an attribute", func() error {
			_, err := s.rt(t, svcTok).ListThreads(metadata.AppendToOutgoingContext(ctx, auth.ActingForHeader, "default/alice;attr.agent=x=y"), &runtimev1.ListThreadsRequest{})
			return err
		}, codes.PermissionDenied, auth.ReasonActingForMalformed},
		{"bounded cost", "raw_arguments nested deeper than max_depth", func() error {
			return exec(alice, aliceThread, "", `{"entities":`+strings.Repeat("[", 40)+strings.Repeat("]", 40)+`}`)
		}, codes.InvalidArgument, "ERROR_REASON_INVALID_REQUEST"},
		{"bounded cost", "user_message over message_max_bytes", func() error {
			_, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: aliceThread, UserMessage: strings.Repeat("m", 2<<20)})
			return err
		}, codes.InvalidArgument, "ERROR_REASON_INVALID_REQUEST"},
	}
	var results []string
	for _, tc := range grpcCases {
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			before := s.decisions(t)
			err := tc.run()
			if status.Code(err) != tc.code || reason(err) != tc.reason {
				t.Fatalf("err %v (reason %q), want %s %s", err, reason(err), tc.code, tc.reason)
			}
			if s.memoryWritten() {
				t.Fatal("the MCP tool ran")
			}
			if after := s.decisions(t); after != before {
				t.Errorf("%d decisions recorded", after-before)
			}
			results = append(results, fmt.Sprintf("%s | gRPC | %s | %s %s", tc.class, tc.name, tc.code, tc.reason))
		})
	}

	// A subagent-only policy cannot be satisfied by a user: the forged
	// call context is ignored, the decision is alice's own (a deny).
	t.Run("grpc/user Authorize with a forged is_subagent call context", func(t *testing.T) {
		az := authzv1.NewAuthzServiceClient(s.conn(t, aliceTok))
		res, err := az.Authorize(ctx, &authzv1.AuthorizeRequest{Principal: &typev1.Principal{Subject: "alice", Tenant: "default", Roles: []string{"user"}},
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: "memory_create_entities",
			CallContext: &typev1.CallContext{IsSubagent: true, Agent: "lead"}})
		if err != nil || res.GetDecision().GetAllow() {
			t.Fatalf("decision %v %v, want a deny", res, err)
		}
		if err := exec(alice, aliceThread, "", ""); err != nil {
			t.Fatal(err)
		}
		if s.memoryWritten() {
			t.Fatal("the subagent-only tool ran for a user")
		}
		results = append(results, "call context | gRPC | user Authorize with forged is_subagent, then ExecuteToolCall | deny (authz.denied), tool not run")
	})

	// No user can write a decision record about anyone.
	t.Run("grpc/user RecordRefusal naming another principal", func(t *testing.T) {
		before := s.decisions(t)
		_, err := authzv1.NewAuthzServiceClient(s.conn(t, aliceTok)).RecordRefusal(ctx, &authzv1.RecordRefusalRequest{
			Principal: &typev1.Principal{Subject: "mallory", Tenant: "default"}, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL,
			Action: authzv1.Action_ACTION_CALL, Target: "x", Reason: &authzv1.Reason{Code: "forged"}})
		if status.Code(err) != codes.PermissionDenied || reason(err) != auth.ReasonServiceRequired {
			t.Fatalf("err %v, want PERMISSION_DENIED SERVICE_REQUIRED", err)
		}
		if s.decisions(t) != before {
			t.Fatal("a decision was forged")
		}
		results = append(results, "audit | gRPC | user RecordRefusal naming another principal | PermissionDenied SERVICE_REQUIRED, nothing recorded")
	})

	// A refusal the runtime decides itself is a decision about the caller.
	t.Run("grpc/unknown tool is recorded as a refusal", func(t *testing.T) {
		res, err := alice.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: aliceThread, ToolCall: &runtimev1.ToolCall{Id: "u1", Name: "memory_no_such_tool"}})
		if err != nil || res.GetResult().GetReasonCode() != "tool.unknown" {
			t.Fatalf("%v %v", res, err)
		}
		az := authzv1.NewAuthzServiceClient(s.conn(t, adminTok))
		ds, err := az.ListDecisions(ctx, &authzv1.ListDecisionsRequest{Kind: authzv1.DecisionKind_DECISION_KIND_REFUSAL})
		if err != nil || len(ds.GetDecisions()) == 0 {
			t.Fatalf("no refusal recorded: %v %v", ds, err)
		}
		d := ds.GetDecisions()[0]
		if d.GetPrincipal().GetSubject() != "alice" || d.GetAllow() || d.GetTarget() != "memory_no_such_tool" || len(d.GetReasons()) != 1 || d.GetReasons()[0].GetCode() != "tool.unknown" ||
			d.GetCallContext().GetThreadId() != aliceThread {
			t.Fatalf("refusal record %v", d)
		}
		results = append(results, "audit | gRPC | unknown tool | POLICY tool.unknown, recorded as DECISION_KIND_REFUSAL for alice")
	})

	// Rate limit: the flooder's decision bucket (burst 3) empties.
	t.Run("grpc/decision RPCs past the principal's bucket", func(t *testing.T) {
		fl := s.rt(t, floodTok)
		th := newThread(t, fl)
		var err error
		for i := 0; i < 10 && err == nil; i++ {
			_, err = fl.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th})
		}
		if status.Code(err) != codes.ResourceExhausted || reason(err) != grpcx.ReasonRateLimited {
			t.Fatalf("err %v, want RESOURCE_EXHAUSTED RATE_LIMITED", err)
		}
		var ri *errdetails.RetryInfo
		for _, d := range status.Convert(err).Details() {
			if r, ok := d.(*errdetails.RetryInfo); ok {
				ri = r
			}
		}
		if ri == nil || ri.GetRetryDelay().AsDuration() <= 0 || !strings.Contains(status.Convert(err).Message(), "server.rate_limits[role=flood].decisions_per_second") {
			t.Fatalf("no RetryInfo or limit name: %v", err)
		}
		results = append(results, "bounded cost | gRPC | decision RPCs past the bucket | ResourceExhausted RATE_LIMITED + RetryInfo")
	})

	// REST.
	exBody := func(n int) string {
		return `{"tool_call":{"id":"r1","name":"memory_create_entities","raw_arguments":"{\"entities\":[],\"pad\":\"` + strings.Repeat("x", n) + `\"}"}}`
	}
	principalB64 := func(p *typev1.Principal) string { return base64.StdEncoding.EncodeToString(auth.EncodePrincipal(p)) }
	restCases := []struct {
		class, name string
		hc          httpCase
		code        int
		want        string
	}{
		{"sessions/credential", "no credential", httpCase{method: "POST", path: "/v1/threads/" + aliceThread + ":executeToolCall", body: exBody(1)}, 401, ""},
		{"bounded cost", "tool-call body over tool_call_max_body_bytes (Content-Length)", httpCase{method: "POST", path: "/v1/threads/" + aliceThread + ":executeToolCall", body: exBody(80 << 10), headers: bearer(aliceTok)}, 400, "server.http.tool_call_max_body_bytes"},
		{"bounded cost", "tool-call body over tool_call_max_body_bytes (chunked)", httpCase{method: "POST", path: "/v1/threads/" + aliceThread + ":executeToolCall", body: exBody(80 << 10), chunked: true, headers: bearer(aliceTok)}, 400, "server.http.tool_call_max_body_bytes"},
		{"bounded cost", "other body over max_body_bytes", httpCase{method: "POST", path: "/v1/threads", body: `{"metadata":{"k":"` + strings.Repeat("x", 2<<20) + `"}}`, headers: bearer(aliceTok)}, 400, "server.http.max_body_bytes"},
		{"structured identity", "user credential sends Toolplane-Principal-Bin", httpCase{method: "GET", path: "/v1/threads", headers: with(bearer(aliceTok), "Toolplane-Principal-Bin", principalB64(root))}, 403, auth.ReasonActingForForbidden},
		{"call context", "executeToolCall on another principal's thread", httpCase{method: "POST", path: "/v1/threads/" + malloryThread + ":executeToolCall", body: exBody(1), headers: bearer(aliceTok)}, 404, "THREAD_NOT_FOUND"},
	}
	for _, tc := range restCases {
		t.Run("rest/"+tc.name, func(t *testing.T) {
			before := s.decisions(t)
			code, _, body := s.do(t, s.httpURL, tc.hc)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("HTTP %d %.300s, want %d containing %q", code, body, tc.code, tc.want)
			}
			if s.memoryWritten() {
				t.Fatal("the MCP tool ran")
			}
			if after := s.decisions(t); after != before {
				t.Errorf("%d decisions recorded", after-before)
			}
			results = append(results, fmt.Sprintf("%s | REST | %s | HTTP %d %s", tc.class, tc.name, tc.code, tc.want))
		})
	}
	// Structured identity over REST: a service names a principal whose
	// values hold every delimiter; it arrives unchanged.
	t.Run("rest/service names a principal full of delimiters", func(t *testing.T) {
		odd := &typev1.Principal{Subject: "bob;roles=admin,x=y/z\nü", Tenant: "default", Roles: []string{"user"}}
		code, _, body := s.do(t, s.httpURL, httpCase{method: "POST", path: "/v1/threads", body: `{}`, headers: with(bearer(svcTok), "Toolplane-Principal-Bin", principalB64(odd))})
		var res struct {
			Thread struct {
				OwnerSubject string `json:"owner_subject"`
			} `json:"thread"`
		}
		_ = json.Unmarshal([]byte(body), &res)
		if code != 200 || res.Thread.OwnerSubject != odd.Subject {
			t.Fatalf("HTTP %d %s: owner %q, want %q", code, body, res.Thread.OwnerSubject, odd.Subject)
		}
		results = append(results, "structured identity | REST | service names a principal with ; = , / newline ü | owner_subject unchanged")
	})

	// The MCP front door.
	tr, err := transport.NewStreamableHTTP(s.mcpURL, transport.WithHTTPHeaders(bearer(aliceTok)))
	if err != nil {
		t.Fatal(err)
	}
	mc := client.NewClient(tr, client.WithLegacyProtocolOnly())
	t.Cleanup(func() { _ = mc.Close() })
	ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := mc.Start(ictx); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Initialize(ictx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	sid := tr.GetSessionId()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_create_entities","arguments":{"entities":[{"name":"m","entityType":"t","observations":[]}]}}}`
	sess := func(tok string, kv ...string) map[string]string {
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		return with(h, kv...)
	}
	mcpCases := []struct {
		class, name string
		hc          httpCase
		code        int
		challenge   string
	}{
		{"sessions/credential", "POST with the session id, no credential", httpCase{method: "POST", body: call, headers: sess("")}, 401, `Bearer realm="toolplane"`},
		{"sessions/credential", "GET stream with the session id, no credential", httpCase{method: "GET", headers: sess("")}, 401, `Bearer realm="toolplane"`},
		{"sessions/credential", "DELETE with the session id, no credential", httpCase{method: "DELETE", headers: sess("")}, 401, `Bearer realm="toolplane"`},
		{"sessions/credential", "POST with an invalid token", httpCase{method: "POST", body: call, headers: sess("not-a-token")}, 401, `Bearer realm="toolplane", error="invalid_token"`},
		{"sessions/credential", "another principal replays the session id (POST)", httpCase{method: "POST", body: call, headers: sess(malloryTok)}, 404, ""},
		{"sessions/credential", "another principal replays the session id (GET)", httpCase{method: "GET", headers: sess(malloryTok)}, 404, ""},
		{"sessions/credential", "another principal ends the session (DELETE)", httpCase{method: "DELETE", headers: sess(malloryTok)}, 404, ""},
		{"sessions/credential", "browser request from a foreign Origin", httpCase{method: "POST", body: call, headers: sess(aliceTok, "Origin", "https://evil.example")}, 403, ""},
		{"bounded cost", "POST body over mcp_max_body_bytes", httpCase{method: "POST", body: strings.Replace(call, `"observations":[]`, `"observations":["`+strings.Repeat("x", 80<<10)+`"]`, 1), headers: sess(aliceTok)}, 413, ""},
	}
	for _, tc := range mcpCases {
		t.Run("mcp/"+tc.name, func(t *testing.T) {
			before := s.decisions(t)
			code, h, body := s.do(t, s.mcpURL, tc.hc)
			if code != tc.code {
				t.Fatalf("HTTP %d %.300s, want %d", code, body, tc.code)
			}
			if tc.challenge != "" && !strings.HasPrefix(h.Get("WWW-Authenticate"), tc.challenge) {
				t.Errorf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, `"jsonrpc"`) {
				t.Errorf("a JSON-RPC body: %s", body)
			}
			if s.memoryWritten() {
				t.Fatal("the MCP tool ran")
			}
			if after := s.decisions(t); after != before {
				t.Errorf("%d decisions recorded", after-before)
			}
			results = append(results, fmt.Sprintf("%s | MCP | %s | HTTP %d", tc.class, tc.name, tc.code))
		})
	}
	// alice's session survived; the subagent-only tool is still refused to
	// her through it (a POLICY result, not run).
	ires, err := mc.CallTool(ictx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "memory_create_entities", Arguments: map[string]any{"entities": []any{}}}})
	if err != nil || !ires.IsError || s.memoryWritten() {
		t.Fatalf("alice's own call through her session: %v %v (memory written %v)", ires, err, s.memoryWritten())
	}

	// The control: the same call from the admin runs and writes the file,
	// so every "nothing ran" check above could fail.
	adm := s.rt(t, adminTok)
	if err := exec(adm, newThread(t, adm), "", ""); err != nil || !s.memoryWritten() {
		t.Fatalf("control call: %v, memory written %v", err, s.memoryWritten())
	}
	t.Logf("hostile cases (class | transport | case | result):\n%s", strings.Join(results, "\n"))
	_ = bytes.MinRead
}
