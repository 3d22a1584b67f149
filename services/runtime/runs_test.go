package runtime_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodelalt"
)

// loopSuite is the whole product in one process (catalog, authz, skills
// and runtime through internal/app, auth on, the npm everything server
// behind the catalog) with runtime.loop pointing at a fake model.
type loopSuite struct {
	t                  *testing.T
	dataDir, ext       string
	grpcAddr, httpAddr string
	cancel             context.CancelFunc
	done               chan error
	conns              []*grpc.ClientConn
	mutate             func(*app.Config) // applied to the config at every start
}

const (
	loopUserToken  = "loop-user-token-0123456789"
	loopAdminToken = "loop-admin-token-0123456789"
)

func loopSHA(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func loopEverything(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	p := filepath.Join(dir, "..", "..", ".tools", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err == nil {
		if _, err := exec.LookPath("node"); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("npm server-everything not installed")
	}
	t.Skip("npm server-everything not installed")
	return ""
}

func startLoopSuite(t *testing.T, models []runtime.ModelConfig) *loopSuite {
	t.Helper()
	return startLoopSuiteWith(t, runtime.LoopConfig{Models: models})
}

func startLoopSuiteWith(t *testing.T, lc runtime.LoopConfig) *loopSuite {
	t.Helper()
	return startLoopSuiteMut(t, lc, nil)
}

func startLoopSuiteMut(t *testing.T, lc runtime.LoopConfig, mutate func(*app.Config)) *loopSuite {
	t.Helper()
	everything := loopEverything(t)
	runtime.SetLoopConfigForTest(&lc)
	t.Cleanup(func() { runtime.SetLoopConfigForTest(nil) })
	dir := t.TempDir()
	s := &loopSuite{t: t, dataDir: filepath.Join(dir, "data"), ext: filepath.Join(dir, "ext.json"), mutate: mutate}
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": map[string]any{"command": "node", "args": []string{everything}}}})
	if err := os.WriteFile(s.ext, ext, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *loopSuite) start() {
	t := s.t
	cfg := app.DefaultConfig()
	cfg.Server.DataDir = s.dataDir
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod, cfg.Server.ShutdownTimeout = time.Millisecond, 5*time.Second
	cfg.Catalog.ExtensionsConfig = s.ext
	cfg.Auth.Enabled = true
	cfg.Auth.Tokens = []config.Token{
		{Name: "user", SHA256: loopSHA(loopUserToken), Kind: "user", Subject: "carol", Roles: []string{"user"}},
		{Name: "admin", SHA256: loopSHA(loopAdminToken), Kind: "user", Subject: "root", Roles: []string{"admin"}},
	}
	if s.mutate != nil {
		s.mutate(&cfg)
	}
	au, err := app.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := app.Listen(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.grpcAddr, s.httpAddr = lis.GRPC.Addr().String(), lis.HTTP.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- app.Run(ctx, &cfg, au, lis, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnReady: func(string, string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("suite stopped: %v", err)
	case <-time.After(120 * time.Second): // a hang guard; a loaded 2-core machine under -race needs more than 30 s at 12,500 tools
		t.Fatal("suite not ready after 120s")
	}
	cat := catalogv1.NewCatalogServiceClient(s.dial(loopAdminToken))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cat.ListServers(context.Background(), &catalogv1.ListServersRequest{})
		if err == nil && len(resp.GetServers()) == 1 && resp.GetServers()[0].GetState() == catalogv1.ServerState_SERVER_STATE_READY {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MCP server not ready: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *loopSuite) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.t.Error("suite did not stop in 20s")
	}
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns, s.cancel = nil, nil
}

func (s *loopSuite) dial(token string) *grpc.ClientConn {
	c, err := grpcx.Dial(s.grpcAddr, grpcx.DialOptions{Token: token, MaxMessageBytes: 64 << 20})
	if err != nil {
		s.t.Fatal(err)
	}
	s.conns = append(s.conns, c)
	return c
}

func (s *loopSuite) rt() runtimev1.RuntimeServiceClient {
	return runtimev1.NewRuntimeServiceClient(s.dial(loopUserToken))
}

func (s *loopSuite) thread(c runtimev1.RuntimeServiceClient) string {
	s.t.Helper()
	r, err := c.CreateThread(context.Background(), &runtimev1.CreateThreadRequest{})
	if err != nil {
		s.t.Fatal(err)
	}
	return r.GetThread().GetThreadId()
}

// collect reads a RunTurn/ResumeRun stream to its end.
func collect[T any](t *testing.T, st grpc.ServerStreamingClient[T]) []*runtimev1.RunEvent {
	t.Helper()
	var out []*runtimev1.RunEvent
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, any(m).(interface{ GetEvent() *runtimev1.RunEvent }).GetEvent())
	}
}

func lastStatus(evs []*runtimev1.RunEvent) runtimev1.RunStatus {
	for i := len(evs) - 1; i >= 0; i-- {
		if _, ok := evs[i].GetEvent().(*runtimev1.RunEvent_Status); ok {
			return evs[i].GetStatus()
		}
	}
	return runtimev1.RunStatus_RUN_STATUS_UNSPECIFIED
}

func modelCfg(name, url string, stream bool) runtime.ModelConfig {
	return runtime.ModelConfig{Name: name, BaseURL: url, Stream: &stream}
}

// TestRunTurnEndToEnd: search → promote → call (a real MCP tool through
// the catalog) → answer, over gRPC, with the messages stored in order.
func TestRunTurnEndToEnd(t *testing.T) {
	fm := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"select:everything_echo"}`}}, PromptTokens: 50, CompletionTokens: 5},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "everything_echo", Args: `{"message":"ping from the loop"}`}}, PromptTokens: 60, CompletionTokens: 5},
		fakemodel.Reply{Content: "The tool said: ping from the loop", PromptTokens: 70, CompletionTokens: 7},
	)
	defer fm.Close()
	s := startLoopSuite(t, []runtime.ModelConfig{modelCfg("m1", fm.BaseURL(), true)})
	c := s.rt()
	th := s.thread(c)
	ctx := context.Background()
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "echo something"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v", evs)
	}
	var promoted, echoOK bool
	var final string
	var deltas strings.Builder
	for _, e := range evs {
		if loopContains(e.GetPromoted().GetNames(), "everything_echo") {
			promoted = true
		}
		if f := e.GetToolCallFinished(); f.GetName() == "everything_echo" && f.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			echoOK = true
		}
		if m := e.GetFinalMessage(); m != nil {
			final = m.GetContent()
		}
		deltas.WriteString(e.GetTextDelta())
	}
	if !promoted || !echoOK || final != "The tool said: ping from the loop" || deltas.String() != final {
		t.Fatalf("promoted %v echo %v final %q deltas %q", promoted, echoOK, final, deltas.String())
	}
	ms, err := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range ms.GetMessages() {
		roles = append(roles, strings.TrimPrefix(m.GetRole().String(), "MESSAGE_ROLE_"))
	}
	if strings.Join(roles, ",") != "USER,ASSISTANT,TOOL,ASSISTANT,TOOL,ASSISTANT" {
		t.Fatalf("stored roles %v", roles)
	}
	if !strings.Contains(ms.GetMessages()[4].GetContent(), "ping from the loop") {
		t.Fatalf("echo result %q", ms.GetMessages()[4].GetContent())
	}
	runs, err := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th})
	if err != nil || len(runs.GetRuns()) != 1 || runs.GetRuns()[0].GetUsage().GetTotalTokens() != 197 || runs.GetRuns()[0].GetModel() != "m1" {
		t.Fatalf("runs %v %v", runs, err)
	}
	got, _ := c.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
	if got.GetThread().GetTokenUsage().GetTotalTokens() != 197 || !loopContains(got.GetThread().GetPromoted().GetNames(), "everything_echo") {
		t.Fatalf("thread %v", got.GetThread())
	}
	reqs := fm.Requests()
	if loopContains(reqs[0].ToolNames(), "everything_echo") || !loopContains(reqs[1].ToolNames(), "everything_echo") {
		t.Fatalf("bound tools: %v / %v", reqs[0].ToolNames(), reqs[1].ToolNames())
	}
	if p := fm.Problems(); len(p) > 0 {
		t.Fatalf("provider-rule violations: %v", p)
	}
	// Metrics of the loop.
	mresp, err := http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		`toolplane_runtime_runs_total\{kind="lead",reason="",service="runtime",status="completed"\} 1\n`,
		`toolplane_runtime_model_calls_total\{model="m1",result="ok",service="runtime"\} 3\n`,
		`toolplane_runtime_model_tokens_total\{direction="input",model="m1",service="runtime"\} 180\n`,
	} {
		if !regexp.MustCompile(want).Match(mb) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Another principal cannot see the runs.
	if _, err := runtimev1.NewRuntimeServiceClient(s.dial(loopAdminToken)).ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th}); status.Code(err) != codes.NotFound {
		t.Fatalf("other principal: %v", err)
	}
}

// TestRunTurnClarifyCancelREST: clarification and ResumeRun over gRPC with
// the reactive fake (non-streaming), CancelRun of an in-flight real MCP call
// within 2 s, and the REST mirror streaming newline-delimited JSON.
func TestRunTurnClarifyCancelREST(t *testing.T) {
	brain := func(c fakemodelalt.Conversation) fakemodelalt.Turn {
		l := c.Last()
		switch {
		case l.Role == "user" && strings.Contains(l.Text, "slow please"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "tool_search", Args: `{"query":"select:everything_trigger-long-running-operation"}`}}}
		case l.Role == "tool" && strings.Contains(c.Msgs[len(c.Msgs)-2].Text, "") && c.Has("everything_trigger-long-running-operation") && !strings.Contains(l.Text, "Long running"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "everything_trigger-long-running-operation", Args: `{"duration":30,"steps":30}`}}}
		case l.Role == "user" && strings.Contains(l.Text, "Oslo"):
			return fakemodelalt.Turn{Text: "Oslo it is: sunny."}
		case l.Role == "user" && strings.Contains(l.Text, "weather"):
			return fakemodelalt.Turn{Calls: []fakemodelalt.Call{{Name: "ask_clarification", Args: `{"question":"Which city?"}`}}}
		}
		return fakemodelalt.Turn{Text: "streamed over REST"}
	}
	fm := fakemodelalt.Start(brain)
	defer fm.Close()
	s := startLoopSuite(t, []runtime.ModelConfig{modelCfg("alt", fm.BaseURL(), false)})
	c := s.rt()
	ctx := context.Background()

	// Clarification, then resume.
	th := s.thread(c)
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "what's the weather?"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT {
		t.Fatalf("events %v", evs)
	}
	runID := evs[0].GetRunId()
	runs, _ := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th})
	if runs.GetRuns()[0].GetPendingQuestion() != "Which city?" {
		t.Fatalf("run %v", runs.GetRuns()[0])
	}
	rs, err := c.ResumeRun(ctx, &runtimev1.ResumeRunRequest{ThreadId: th, RunId: runID, Answer: "Oslo"})
	if err != nil {
		t.Fatal(err)
	}
	evs = collect(t, rs)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED || evs[len(evs)-2].GetFinalMessage().GetContent() != "Oslo it is: sunny." {
		t.Fatalf("resume events %v", evs)
	}
	rs, _ = c.ResumeRun(ctx, &runtimev1.ResumeRunRequest{ThreadId: th, RunId: runID, Answer: "again"})
	if _, err := rs.Recv(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not waiting") {
		t.Fatalf("second resume: %v", err)
	}

	// Cancel an in-flight MCP call.
	th2 := s.thread(c)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st, err = c.RunTurn(sctx, &runtimev1.RunTurnRequest{ThreadId: th2, Message: "slow please"})
	if err != nil {
		t.Fatal(err)
	}
	var run2 string
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream before the slow call started: %v", err)
		}
		run2 = m.GetEvent().GetRunId()
		if m.GetEvent().GetToolCallStarted().GetName() == "everything_trigger-long-running-operation" {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // the call is now in the MCP server
	t0 := time.Now()
	cr, err := c.CancelRun(ctx, &runtimev1.CancelRunRequest{ThreadId: th2, RunId: run2})
	took := time.Since(t0)
	if err != nil || cr.GetRun().GetStatus() != runtimev1.RunStatus_RUN_STATUS_CANCELLED || took > 2*time.Second {
		t.Fatalf("CancelRun: %v %v after %s", cr, err, took)
	}
	t.Logf("CancelRun returned the cancelled run after %s", took)
	rest := collect(t, st)
	if lastStatus(rest) != runtimev1.RunStatus_RUN_STATUS_CANCELLED {
		t.Fatalf("stream end %v", rest)
	}
	ms, _ := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th2})
	last := ms.GetMessages()[len(ms.GetMessages())-1]
	if last.GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_TOOL || last.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
		t.Fatalf("the cancelled call left %v", last)
	}

	// REST: the same stream as newline-delimited JSON.
	th3 := s.thread(c)
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.httpAddr+"/v1/threads/"+th3+"/runs", strings.NewReader(`{"message":"hello over REST"}`))
	req.Header.Set("Authorization", "Bearer "+loopUserToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("REST %d: %s", resp.StatusCode, b)
	}
	var lines int
	var restFinal string
	var restStatus string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		lines++
		var env struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil || env.Error != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		var r runtimev1.RunTurnResponse
		if err := protojson.Unmarshal(env.Result, &r); err != nil {
			t.Fatalf("result %s: %v", env.Result, err)
		}
		if m := r.GetEvent().GetFinalMessage(); m != nil {
			restFinal = m.GetContent()
		}
		if _, ok := r.GetEvent().GetEvent().(*runtimev1.RunEvent_Status); ok {
			restStatus = r.GetEvent().GetStatus().String()
		}
	}
	if restFinal != "streamed over REST" || restStatus != "RUN_STATUS_COMPLETED" || lines < 4 {
		t.Fatalf("REST stream: %d lines, final %q, status %s", lines, restFinal, restStatus)
	}
	// REST errors: an unknown thread answers the error envelope.
	req, _ = http.NewRequest(http.MethodPost, "http://"+s.httpAddr+"/v1/threads/nope/runs", strings.NewReader(`{"message":"x"}`))
	req.Header.Set("Authorization", "Bearer "+loopUserToken)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "THREAD_NOT_FOUND") {
		t.Fatalf("REST error %d: %s", resp2.StatusCode, b)
	}
	// One error envelope: the streaming call's error body is the unary
	// error body (google.rpc.Status JSON) for the same condition.
	var streamed map[string]any
	if err := json.Unmarshal(b, &streamed); err != nil {
		t.Fatalf("stream error body %q: %v", b, err)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://"+s.httpAddr+"/v1/threads/nope/runs", nil)
	req.Header.Set("Authorization", "Bearer "+loopUserToken)
	resp3, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var unary map[string]any
	_ = json.NewDecoder(resp3.Body).Decode(&unary)
	resp3.Body.Close()
	if resp3.StatusCode != http.StatusNotFound || !reflect.DeepEqual(streamed, unary) {
		t.Fatalf("stream error %s differs from unary error %v", b, unary)
	}
	t.Logf("REST streaming error for an unknown thread: HTTP %d %s", resp2.StatusCode, strings.TrimSpace(string(b)))
}

// TestRunTurnModelAuthzAndRestart: model:use through the real authz
// service (denied model → fallback to the first allowed one), and a
// restart in the middle of a turn leaves the run interrupted.
func TestRunTurnModelAuthzAndRestart(t *testing.T) {
	hold := make(chan struct{})
	fm := fakemodel.New(fakemodel.Reply{Content: "from the allowed model"}, fakemodel.Reply{Content: "never", Hold: hold})
	defer fm.Close()
	defer close(hold)
	s := startLoopSuite(t, []runtime.ModelConfig{modelCfg("big", fm.BaseURL(), true), modelCfg("small", fm.BaseURL(), true)})
	ctx := context.Background()
	admin := authzv1.NewAuthzServiceClient(s.dial(loopAdminToken))
	if _, err := admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{
		{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MODEL, Target: "big", Action: authzv1.Action_ACTION_USE, Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY},
	}}); err != nil {
		t.Fatalf("AddPolicies: %v", err)
	}
	c := s.rt()
	th := s.thread(c)
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "hi", Model: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, st); lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v", evs)
	}
	runs, _ := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th})
	if runs.GetRuns()[0].GetModel() != "small" {
		t.Fatalf("model %q, want the fallback", runs.GetRuns()[0].GetModel())
	}
	// Options may only tighten the configured limits.
	if st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "x", Options: loopStruct(t, `{"max_model_calls": 1000}`)}); err == nil {
		if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("oversized option: %v", err)
		}
	}

	// A turn in flight when the process stops is interrupted, not half-written.
	th2 := s.thread(c)
	sctx, stop := context.WithCancel(ctx)
	st, err = c.RunTurn(sctx, &runtimev1.RunTurnRequest{ThreadId: th2, Message: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetEvent().GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
		t.Fatalf("first event %v %v", m, err)
	}
	for len(fm.Requests()) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	// Simulate a crash: copy the data dir while the run is RUNNING, then
	// start a fresh process on the copy.
	crashDir := filepath.Join(t.TempDir(), "data")
	if err := copyDir(s.dataDir, crashDir); err != nil {
		t.Fatal(err)
	}
	stop()
	s.stop()
	s.dataDir = crashDir
	s.start()
	c = s.rt()
	runs, err = c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th2})
	if err != nil || len(runs.GetRuns()) != 1 || runs.GetRuns()[0].GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED {
		t.Fatalf("after restart: %v %v", runs, err)
	}
	ms, _ := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th2})
	if len(ms.GetMessages()) != 1 || ms.GetMessages()[0].GetRole() != runtimev1.MessageRole_MESSAGE_ROLE_USER {
		t.Fatalf("messages after restart: %v", ms.GetMessages())
	}
}

func loopContains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func loopStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	var st structpb.Struct
	if err := protojson.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// copyDir copies a directory tree of regular files.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600)
	})
}

// TestRunTurnSubagent: the task tool runs a child loop on a child thread
// through the real pipeline; the child's promotions stay in the child
// thread; a subagent type with its own skills list gets the intersection
// with the parent agent's through a derived agent.
func TestRunTurnSubagent(t *testing.T) {
	task := `{"description":"echo","prompt":"Echo hi with the echo tool","subagent_type":"researcher"}`
	fm := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "task", Args: task}}},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"select:everything_echo"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "everything_echo", Args: `{"message":"hi"}`}, {Name: "ask_clarification", Args: `{"question":"?"}`}}},
		fakemodel.Reply{Content: "child done: hi"},
		fakemodel.Reply{Content: "The researcher says hi."},
	)
	defer fm.Close()
	stream := true
	s := startLoopSuiteWith(t, runtime.LoopConfig{
		Models:    []runtime.ModelConfig{{Name: "m1", BaseURL: fm.BaseURL(), Stream: &stream}},
		Subagents: runtime.SubagentsConfig{Types: []runtime.SubagentTypeConfig{{Name: "researcher", Description: "Looks things up.", SystemPrompt: "You are a subagent researcher.", Skills: []string{"x", "z"}}}},
	})
	ctx := context.Background()
	admin := runtimev1.NewRuntimeServiceClient(s.dial(loopAdminToken))
	if _, err := admin.UpsertAgent(ctx, &runtimev1.UpsertAgentRequest{Agent: &runtimev1.Agent{Name: "lead", SubagentsEnabled: true, Skills: &typev1.StringList{Values: []string{"x", "y"}}}}); err != nil {
		t.Fatal(err)
	}
	// A policy on subagents (real authz engine): listing and calling ls are
	// denied unless the caller is not a subagent.
	az := authzv1.NewAuthzServiceClient(s.dial(loopAdminToken))
	var pols []*authzv1.Policy
	for _, act := range []authzv1.Action{authzv1.Action_ACTION_LIST, authzv1.Action_ACTION_CALL} {
		pols = append(pols, &authzv1.Policy{Role: "user", Tenant: "*", ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "ls", Action: act,
			Effect: authzv1.PolicyEffect_POLICY_EFFECT_DENY, Conditions: []*authzv1.Condition{{Check: &authzv1.Condition_IsSubagent{IsSubagent: false}}}})
	}
	if _, err := az.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: pols}); err != nil {
		t.Fatal(err)
	}
	c := s.rt()
	tr, err := c.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	th := tr.GetThread().GetThreadId()
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "ask the researcher"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, st)
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED || evs[len(evs)-2].GetFinalMessage().GetContent() != "The researcher says hi." {
		t.Fatalf("events %v", evs)
	}
	var res *runtimev1.ToolResult
	for _, e := range evs {
		if f := e.GetToolCallFinished(); f.GetName() == "task" {
			res = f
		}
	}
	meta := res.GetStructuredContent().GetFields()
	if res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || meta["subagent_status"].GetStringValue() != "completed" {
		t.Fatalf("task result %v", res)
	}
	child := meta["child_thread_id"].GetStringValue()
	ct, err := c.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: child})
	if err != nil {
		t.Fatal(err)
	}
	if !loopContains(ct.GetThread().GetPromoted().GetNames(), "everything_echo") || ct.GetThread().GetAgent() != "lead" ||
		ct.GetThread().GetMetadata()["toolplane.parent_thread_id"] != th {
		t.Fatalf("child thread %v", ct.GetThread())
	}
	pt, _ := c.GetThread(ctx, &runtimev1.GetThreadRequest{ThreadId: th})
	if len(pt.GetThread().GetPromoted().GetNames()) != 0 {
		t.Fatalf("child promotions leaked into the parent: %v", pt.GetThread().GetPromoted())
	}
	// No derived agent is stored; the child thread is not listed.
	ags, err := admin.ListAgents(ctx, &runtimev1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ags.GetAgents() {
		if a.GetName() != "lead" && a.GetName() != "default" {
			t.Fatalf("unexpected agent %v", a)
		}
	}
	lt, err := c.ListThreads(ctx, &runtimev1.ListThreadsRequest{})
	if err != nil || len(lt.GetThreads()) != 1 || lt.GetThreads()[0].GetThreadId() != th {
		t.Fatalf("ListThreads %v %v (child %s)", lt, err, child)
	}
	// is_subagent: the subagent policy keeps ls from the child (not bound,
	// below) and allows it in the parent. The user cannot call a tool on
	// the child thread at all: it is the loop's (docs/architecture.md §5,
	// "Call context"), so is_subagent=true is never the user's to claim.
	ls := &runtimev1.ToolCall{Id: "ls1", Name: "ls", Arguments: loopStruct(t, `{"path":"/mnt/user-data/workspace"}`)}
	if cr, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: child, ToolCall: ls}); status.Code(err) != codes.NotFound {
		t.Fatalf("ls in the child from the user: %v %v, want NOT_FOUND", cr, err)
	}
	pr, err := c.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: th, ToolCall: ls})
	if err != nil || pr.GetResult().GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
		t.Fatalf("ls in the parent: %v %v", pr, err)
	}
	cm, _ := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: child})
	var clar *runtimev1.Message
	for _, m := range cm.GetMessages() {
		if m.GetName() == "ask_clarification" {
			clar = m
		}
	}
	if clar == nil || !strings.Contains(clar.GetContent(), "not available to this subagent") {
		t.Fatalf("clarification in a subagent: %v", clar)
	}
	reqs := fm.Requests()
	if !loopContains(reqs[0].ToolNames(), "ls") || loopContains(reqs[1].ToolNames(), "ls") {
		t.Fatalf("ls bound: lead %v child %v", reqs[0].ToolNames(), reqs[1].ToolNames())
	}
	if !loopContains(reqs[0].ToolNames(), "task") || loopContains(reqs[1].ToolNames(), "task") || loopContains(reqs[1].ToolNames(), "ask_clarification") {
		t.Fatalf("bound: lead %v child %v", reqs[0].ToolNames(), reqs[1].ToolNames())
	}
	if !strings.HasPrefix(reqs[1].System(), "You are a subagent researcher.") {
		t.Fatalf("child system prompt %q", reqs[1].System())
	}
	if p := fm.Problems(); len(p) > 0 {
		t.Fatalf("provider-rule violations: %v", p)
	}
}

// TestRunTurnCrashDuringToolCall: a process stopped while a real MCP call
// is in flight leaves the run interrupted; the next turn first stores a
// result for the unanswered call, so the conversation stays well formed.
func TestRunTurnCrashDuringToolCall(t *testing.T) {
	fm := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "tool_search", Args: `{"query":"select:everything_trigger-long-running-operation"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "everything_trigger-long-running-operation", Args: `{"duration":30,"steps":30}`}}},
	)
	defer fm.Close()
	s := startLoopSuite(t, []runtime.ModelConfig{modelCfg("m1", fm.BaseURL(), true)})
	ctx := context.Background()
	c := s.rt()
	th := s.thread(c)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	st, err := c.RunTurn(sctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "run the slow one"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if m.GetEvent().GetToolCallStarted().GetName() == "everything_trigger-long-running-operation" {
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	crashDir := filepath.Join(t.TempDir(), "data")
	if err := copyDir(s.dataDir, crashDir); err != nil {
		t.Fatal(err)
	}
	stop()
	s.stop()
	s.dataDir = crashDir
	s.start()
	c = s.rt()
	runs, err := c.ListRuns(ctx, &runtimev1.ListRunsRequest{ThreadId: th})
	if err != nil || runs.GetRuns()[0].GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED {
		t.Fatalf("after restart: %v %v", runs, err)
	}
	fm.Add(fakemodel.Reply{Content: "Recovered."})
	st, err = c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "what happened?"})
	if err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, st); lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v", evs)
	}
	ms, _ := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
	var roles []string
	for _, m := range ms.GetMessages() {
		roles = append(roles, strings.TrimPrefix(m.GetRole().String(), "MESSAGE_ROLE_"))
	}
	if strings.Join(roles, ",") != "USER,ASSISTANT,TOOL,ASSISTANT,TOOL,USER,ASSISTANT" {
		t.Fatalf("stored roles %v", roles)
	}
	if m := ms.GetMessages()[4]; m.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR || !strings.Contains(m.GetContent(), "interrupted") {
		t.Fatalf("repaired result %v", m)
	}
	if p := fm.Problems(); len(p) > 0 {
		t.Fatalf("provider-rule violations: %v", p)
	}
}

// TestRunTurnParallelToolCalls: the three tool calls of one response run
// at once (each bash call waits, up to 15 s, until all three have started:
// run one after the other, the first would give up and fail), and their
// results are stored in call order although the first finishes last.
func TestRunTurnParallelToolCalls(t *testing.T) {
	barrier := func(me, tail string) string {
		return fmt.Sprintf(`{"command":"touch %[1]s; n=0; while [ ! -e p1 ] || [ ! -e p2 ] || [ ! -e p3 ]; do n=$((n+1)); [ $n -gt 300 ] && { echo alone; exit 7; }; sleep 0.05; done; %[2]s echo done-%[1]s"}`, me, tail)
	}
	fm := fakemodel.New(
		fakemodel.Reply{ToolCalls: []fakemodel.Call{
			{Name: "bash", Args: barrier("p1", "sleep 0.5;")}, {Name: "bash", Args: barrier("p2", "")}, {Name: "bash", Args: barrier("p3", "")},
		}},
		fakemodel.Reply{Content: "all three done"},
	)
	defer fm.Close()
	s := startLoopSuiteMut(t, runtime.LoopConfig{Models: []runtime.ModelConfig{modelCfg("m1", fm.BaseURL(), true)}},
		func(c *app.Config) { c.Runtime.AllowBash = true })
	c := s.rt()
	th := s.thread(c)
	ctx := context.Background()
	start := time.Now()
	st, err := c.RunTurn(ctx, &runtimev1.RunTurnRequest{ThreadId: th, Message: "run the three commands"})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, st)
	t.Logf("turn with three barrier calls took %v", time.Since(start))
	if lastStatus(evs) != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("events %v", evs)
	}
	var finished []string
	for _, e := range evs {
		if f := e.GetToolCallFinished(); f != nil {
			finished = append(finished, textOfResult(f))
		}
	}
	ms, err := c.ListMessages(ctx, &runtimev1.ListMessagesRequest{ThreadId: th})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms.GetMessages() {
		got = append(got, strings.TrimPrefix(m.GetRole().String(), "MESSAGE_ROLE_")+":"+strings.TrimSpace(m.GetContent()))
	}
	want := "USER:run the three commands,ASSISTANT:,TOOL:done-p1,TOOL:done-p2,TOOL:done-p3,ASSISTANT:all three done"
	if strings.Join(got, ",") != want {
		t.Fatalf("stored messages (tool events %q):\n got %v\nwant %v", finished, got, want)
	}
	calls := ms.GetMessages()[1].GetToolCalls()
	for i, m := range ms.GetMessages()[2:5] {
		if m.GetToolCallId() != calls[i].GetId() || m.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS {
			t.Fatalf("result %d answers %q (want %q), status %v", i, m.GetToolCallId(), calls[i].GetId(), m.GetStatus())
		}
	}
	if p := fm.Problems(); len(p) > 0 {
		t.Fatalf("provider-rule violations: %v", p)
	}
}

func textOfResult(r *runtimev1.ToolResult) string {
	var b strings.Builder
	for _, c := range r.GetContent() {
		b.WriteString(c.GetText())
	}
	return strings.TrimSpace(b.String())
}
