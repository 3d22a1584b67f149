package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// cancelWait is how long CancelRun waits for the loop to record the end
// of a cancelled run (docs/architecture.md §3.3: within 2 s).
const cancelWait = 2 * time.Second

// loopState is the agent loop of one Server, built on first use.
type loopState struct {
	mu     sync.Mutex
	engine *runtimeloop.Engine
	err    error
	s      *Server
}

// loopConfigOverride, when set, replaces runtime.loop for every Server
// (tests that start the suite through internal/app; see export_test.go).
var loopConfigOverride atomic.Pointer[LoopConfig]

// configured returns runtime.loop from the service config.
func (ls *loopState) configured() LoopConfig {
	if p := loopConfigOverride.Load(); p != nil {
		return *p
	}
	return ls.s.cfg.Loop
}

// get returns the engine, building it on first use.
func (ls *loopState) get() (*runtimeloop.Engine, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.engine != nil || ls.err != nil {
		return ls.engine, ls.err
	}
	s := ls.s
	c := ls.configured()
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		ls.err = err
		return nil, err
	}
	models := &runtimeloop.StaticModels{ByName: map[string]runtimeloop.Model{}}
	for _, m := range c.Models {
		key := ""
		if m.APIKeyEnv != "" {
			key = os.Getenv(m.APIKeyEnv)
		}
		var cl runtimeloop.Model
		var err error
		switch m.Provider {
		case ProviderAnthropic:
			cl, err = runtimeloop.NewAnthropicModel(runtimeloop.AnthropicSpec{BaseURL: m.BaseURL, Model: m.Model, APIKey: key, Stream: *m.Stream,
				MaxRetries: *m.MaxRetries, Timeout: m.Timeout, MaxTokens: m.MaxTokens, Vision: m.SupportsVision})
		case ProviderOpenAIResponses:
			cl, err = runtimeloop.NewResponsesModel(runtimeloop.ResponsesSpec{BaseURL: m.BaseURL, Model: m.Model, APIKey: key,
				MaxRetries: *m.MaxRetries, Timeout: m.Timeout, MaxTokens: m.MaxTokens, Temperature: m.Temperature, Vision: m.SupportsVision})
		default:
			cl, err = runtimeloop.NewOpenAIModel(runtimeloop.OpenAISpec{BaseURL: m.BaseURL, Model: m.Model, APIKey: key, Stream: *m.Stream,
				MaxRetries: *m.MaxRetries, Timeout: m.Timeout, MaxTokens: m.MaxTokens, Temperature: m.Temperature, Vision: m.SupportsVision})
		}
		if err != nil {
			ls.err = fmt.Errorf("runtime.loop.models[%s].%w", m.Name, err)
			return nil, ls.err
		}
		models.Order = append(models.Order, m.Name)
		models.ByName[m.Name] = cl
	}
	a := loopAdapter{s}
	ls.engine, ls.err = runtimeloop.New(c.engineConfig(), runtimeloop.Deps{
		Assembler: a, Executor: a, Authorizer: a, Store: a, Models: models, Threads: a, Images: a,
		ExecutorStoresResults: false, Logger: s.log, Now: s.now, Observer: newLoopMetrics(s.env.Metrics),
	})
	return ls.engine, ls.err
}

// close stops the agent loop: active runs end as interrupted (their
// in-flight tool calls get a result, so nothing dangles) within 2 s. To be
// called by Server.Close before the store closes.
func (ls *loopState) close() {
	ls.mu.Lock()
	e := ls.engine
	ls.mu.Unlock()
	if e != nil {
		e.Shutdown(cancelWait)
	}
}

// current returns the engine if it was built, without building it.
func (ls *loopState) current() *runtimeloop.Engine {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.engine
}

// ready returns the engine when RunTurn can call a model.
func (ls *loopState) ready() (*runtimeloop.Engine, error) {
	e, err := ls.get()
	if err != nil {
		return nil, grpcx.WithCause(grpcx.Status(codes.FailedPrecondition, errorDomain, runtimev1.ErrorReason_ERROR_REASON_UNSPECIFIED.String(), nil, "agent loop unavailable: runtime.loop could not be applied (the server log names the cause)"), err)
	}
	if len(e.ModelNames()) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "runtime.loop.models: no model is configured, so RunTurn cannot call a model")
	}
	return e, nil
}

// runErr maps loop errors to status errors.
func runErr(err error, runID string) error {
	switch {
	case errors.Is(err, runtimeloop.ErrShutdown):
		return status.Error(codes.Unavailable, "the runtime is shutting down")
	case errors.Is(err, runtimeloop.ErrRunActive):
		return statusErr(codes.FailedPrecondition, runtimev1.ErrorReason_ERROR_REASON_RUN_ACTIVE, "thread_id: a run is already active in this thread")
	case errors.Is(err, runtimeloop.ErrRunNotWaiting):
		return statusErr(codes.FailedPrecondition, runtimev1.ErrorReason_ERROR_REASON_RUN_NOT_WAITING, "run_id: run %q is not waiting for input", runID)
	case errors.Is(err, runtimeloop.ErrNotFound), errors.Is(err, runtimestore.ErrNotFound):
		return statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_RUN_NOT_FOUND, "run_id: run %q not found", runID)
	}
	return storeErr(err)
}

// validText checks user text given to the loop: non-blank, UTF-8, at most
// runtime.limits.message_max_bytes (the bound AssembleTools applies to
// user_message; the loop calls it in process, past the validation
// interceptor).
func (s *Server) validText(field, v string) error {
	if err := s.cfg.textLimit(field, v); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(v) == "":
		return invalid(field, grpcx.ViolationRequired, "must not be empty")
	case !utf8.ValidString(v):
		return invalid(field, grpcx.ViolationInvalidUTF8, "not valid UTF-8")
	}
	return nil
}

// limitsOf reads RunTurn options (max_model_calls, token_budget,
// deadline_seconds). Options may only tighten runtime.loop's limits.
func limitsOf(o *structpb.Struct, c runtimeloop.Config) (runtimeloop.Limits, error) {
	var l runtimeloop.Limits
	for k, v := range o.GetFields() {
		n, ok := v.GetKind().(*structpb.Value_NumberValue)
		if !ok || n.NumberValue <= 0 || n.NumberValue != float64(int64(n.NumberValue)) {
			return l, invalid("options."+k, grpcx.ViolationOutOfRange, "must be a positive integer")
		}
		x := int64(n.NumberValue)
		switch k {
		case "max_model_calls":
			if x > int64(c.Limits.MaxModelCalls) {
				return l, invalid("options.max_model_calls", grpcx.ViolationOutOfRange, "%d exceeds runtime.loop.max_model_calls (%d)", x, c.Limits.MaxModelCalls)
			}
			l.MaxModelCalls = int(x)
		case "token_budget":
			if c.Limits.TokenBudget > 0 && x > c.Limits.TokenBudget {
				return l, invalid("options.token_budget", grpcx.ViolationOutOfRange, "%d exceeds runtime.loop.token_budget (%d)", x, c.Limits.TokenBudget)
			}
			l.TokenBudget = x
		case "deadline_seconds":
			d := time.Duration(x) * time.Second
			if d > c.Limits.Deadline {
				return l, invalid("options.deadline_seconds", grpcx.ViolationOutOfRange, "%d exceeds runtime.loop.deadline (%s)", x, c.Limits.Deadline)
			}
			l.Deadline = d
		default:
			return l, invalid("options."+k, grpcx.ViolationUnknownValue, "unknown option (max_model_calls, token_budget, deadline_seconds)")
		}
	}
	return l, nil
}

// RunTurn runs the agent loop for one user message on one of the caller's
// threads and streams its events (docs/architecture.md §3.3). The stream ends when
// the run completes, fails, is cancelled or waits for input; the outcome
// is in the last status event and in ListRuns. Errors: NOT_FOUND (thread),
// FAILED_PRECONDITION (RUN_ACTIVE; no model configured), INVALID_ARGUMENT
// (options). Closing the stream cancels the run.
func (s *Server) RunTurn(req *runtimev1.RunTurnRequest, stream grpc.ServerStreamingServer[runtimev1.RunTurnResponse]) error {
	ctx := stream.Context()
	if err := s.validText("message", req.GetMessage()); err != nil {
		return err
	}
	if len(req.GetModel()) > 128 {
		return invalid("model", grpcx.ViolationTooLong, "longer than 128 characters")
	}
	th, err := s.actThread(ctx, req.GetThreadId())
	if err != nil {
		return err
	}
	e, err := s.loops.ready()
	if err != nil {
		return err
	}
	limits, err := limitsOf(req.GetOptions(), e.Config())
	if err != nil {
		return err
	}
	agent, err := s.agents.loopAgent(ctx, th)
	if err != nil {
		return err
	}
	if busy, err := s.busyElsewhere(ctx, e, th.Proto.GetThreadId()); err != nil {
		return storeErr(err)
	} else if busy {
		return runErr(runtimeloop.ErrRunActive, "")
	}
	_, err = e.RunTurn(ctx, runtimeloop.TurnRequest{ThreadID: th.Proto.GetThreadId(), Agent: agent, Message: req.GetMessage(), Model: req.GetModel(), Limits: limits},
		func(ev *runtimev1.RunEvent) { _ = stream.Send(&runtimev1.RunTurnResponse{Event: ev}) })
	if err != nil {
		return runErr(err, "")
	}
	return nil
}

// ResumeRun answers the pending clarification of a run waiting for input
// and continues it, streaming like RunTurn. Errors: NOT_FOUND (thread,
// run), FAILED_PRECONDITION (RUN_NOT_WAITING, RUN_ACTIVE).
func (s *Server) ResumeRun(req *runtimev1.ResumeRunRequest, stream grpc.ServerStreamingServer[runtimev1.ResumeRunResponse]) error {
	ctx := stream.Context()
	if req.GetRunId() == "" {
		return invalid("run_id", grpcx.ViolationRequired, "must not be empty")
	}
	if err := s.validText("answer", req.GetAnswer()); err != nil {
		return err
	}
	th, err := s.actThread(ctx, req.GetThreadId())
	if err != nil {
		return err
	}
	e, err := s.loops.ready()
	if err != nil {
		return err
	}
	agent, err := s.agents.loopAgent(ctx, th)
	if err != nil {
		return err
	}
	_, err = e.ResumeRun(ctx, runtimeloop.ResumeRequest{ThreadID: th.Proto.GetThreadId(), RunID: req.GetRunId(), Answer: req.GetAnswer(), Agent: agent},
		func(ev *runtimev1.RunEvent) { _ = stream.Send(&runtimev1.ResumeRunResponse{Event: ev}) })
	if err != nil {
		return runErr(err, req.GetRunId())
	}
	return nil
}

// ListRuns lists the runs of one of the caller's threads, newest first.
func (s *Server) ListRuns(ctx context.Context, req *runtimev1.ListRunsRequest) (*runtimev1.ListRunsResponse, error) {
	if _, _, err := s.ownThread(ctx, req.GetThreadId()); err != nil {
		return nil, err
	}
	runs, err := s.store.ListRuns(ctx, req.GetThreadId())
	if err != nil {
		return nil, storeErr(err)
	}
	return &runtimev1.ListRunsResponse{Runs: runs}, nil
}

// CancelRun stops a running turn and any in-flight tool call, waiting up
// to 2 s for the run to be recorded as cancelled; a run waiting for input
// is cancelled at once; a finished run is returned unchanged.
func (s *Server) CancelRun(ctx context.Context, req *runtimev1.CancelRunRequest) (*runtimev1.CancelRunResponse, error) {
	if req.GetRunId() == "" {
		return nil, invalid("run_id", grpcx.ViolationRequired, "must not be empty")
	}
	if _, _, err := s.ownThread(ctx, req.GetThreadId()); err != nil {
		return nil, err
	}
	e, err := s.loops.get()
	if err != nil {
		// Without an engine no run can be active: answer from the store.
		r, gerr := s.store.GetRun(ctx, req.GetThreadId(), req.GetRunId())
		if gerr != nil {
			return nil, runErr(gerr, req.GetRunId())
		}
		return &runtimev1.CancelRunResponse{Run: r}, nil
	}
	if active, _ := e.Active(req.GetThreadId()); active != req.GetRunId() {
		// Not executing here: a RUNNING run belongs to another replica,
		// reached through its cancel flag (leases.go).
		r, err := s.store.GetRun(ctx, req.GetThreadId(), req.GetRunId())
		if err != nil {
			return nil, runErr(err, req.GetRunId())
		}
		if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING {
			r, err = s.cancelElsewhere(ctx, req.GetThreadId(), req.GetRunId())
			if err != nil {
				return nil, runErr(err, req.GetRunId())
			}
			return &runtimev1.CancelRunResponse{Run: r}, nil
		}
	}
	r, err := e.CancelRun(ctx, req.GetThreadId(), req.GetRunId(), cancelWait)
	if errors.Is(err, runtimeloop.ErrRunActive) {
		// It was waiting and a peer resumed it meanwhile: cancel it there.
		r, err = s.cancelElsewhere(ctx, req.GetThreadId(), req.GetRunId())
	}
	if err != nil {
		return nil, runErr(err, req.GetRunId())
	}
	return &runtimev1.CancelRunResponse{Run: r}, nil
}

// cancelElsewhere sets the cancel flag of a run another replica executes
// and waits up to cancelWait for the owner to record its end (the owner
// polls the flag every cancelPoll); the run is returned as stored then.
func (s *Server) cancelElsewhere(ctx context.Context, threadID, runID string) (*runtimev1.Run, error) {
	if _, _, err := s.store.RequestCancel(ctx, threadID, runID); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cancelWait)
	for {
		r, err := s.store.GetRun(ctx, threadID, runID)
		if err != nil || r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// busyElsewhere reports whether the thread has a RUNNING run this process
// does not execute: another replica's (the final check is StartRun's,
// atomic in the store; this one keeps a second RunTurn from touching the
// thread — the loop repairs a dangling step first — while a peer runs it).
// A run of a stopped replica stays busy until the sweep interrupts it
// (runtime.run_lease).
func (s *Server) busyElsewhere(ctx context.Context, e *runtimeloop.Engine, threadID string) (bool, error) {
	runs, err := s.store.ListRuns(ctx, threadID)
	if err != nil {
		return false, err
	}
	local, _ := e.Active(threadID)
	for _, r := range runs {
		if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING && r.GetRunId() != local {
			return true, nil
		}
	}
	return false, nil
}

// loopAdapter adapts the Server to the loop's interfaces: assembly and
// execution call this service's own logic in process (the same code as
// AssembleTools and ExecuteToolCallStream); upstream services are reached
// only through the Server's gRPC clients.
type loopAdapter struct{ s *Server }

// Assemble implements runtimeloop.Assembler.
func (a loopAdapter) Assemble(ctx context.Context, threadID, user string, profile runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error) {
	r, err := a.s.AssembleTools(inLoop(ctx), &runtimev1.AssembleToolsRequest{ThreadId: threadID, UserMessage: user, Profile: profile})
	if err != nil {
		return nil, errors.New(status.Convert(err).Message())
	}
	return r, nil
}

// Execute implements runtimeloop.Executor: the whole chain with its state
// update committed atomically, but without the tool message — the loop
// runs a step's calls concurrently (runtime.loop.parallel_tool_calls) and
// stores their results in call order in one transaction
// (Deps.ExecutorStoresResults false; docs/architecture.md §3.3).
func (a loopAdapter) Execute(ctx context.Context, threadID, runID string, profile runtimev1.ToolProfile, c *runtimev1.ToolCall, notify func(*typev1.Notification)) (*runtimev1.ToolResult, error) {
	return a.s.execute(inLoop(ctx), threadID, runID, profile, c, notify, returnOnly)
}

// AuthorizeModel implements runtimeloop.ModelAuthorizer with authz
// Authorize(model, use) for the effective principal.
func (a loopAdapter) AuthorizeModel(ctx context.Context, model string) (bool, string, error) {
	resp, err := a.s.authz.Authorize(runtimeident.ActingFor(ctx), &authzv1.AuthorizeRequest{Principal: runtimeident.Principal(ctx), ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MODEL,
		Action: authzv1.Action_ACTION_USE, Target: model})
	if err != nil {
		return false, "", err
	}
	d := resp.GetDecision()
	var why []string
	for _, r := range d.GetReasons() {
		why = append(why, r.GetCode())
	}
	return d.GetAllow(), strings.Join(why, ", "), nil
}

// FilterModels implements runtimeloop.ModelAuthorizer with authz
// FilterResources(model, use).
func (a loopAdapter) FilterModels(ctx context.Context, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	resp, err := a.s.authz.FilterResources(runtimeident.ActingFor(ctx), &authzv1.FilterResourcesRequest{Principal: runtimeident.Principal(ctx), ResourceType: authzv1.ResourceType_RESOURCE_TYPE_MODEL,
		Candidates: names, Action: authzv1.Action_ACTION_USE})
	if err != nil {
		return nil, err
	}
	return resp.GetAllowed(), nil
}

// Messages implements runtimeloop.Store.
func (a loopAdapter) Messages(ctx context.Context, threadID string) ([]*runtimev1.Message, error) {
	var out []*runtimev1.Message
	tok := ""
	for {
		ms, next, err := a.s.store.ListMessages(ctx, threadID, runtimestore.Page{Limit: 1000, Token: tok})
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
		if next == "" {
			return out, nil
		}
		tok = next
	}
}

// AppendMessages implements runtimeloop.Store.
func (a loopAdapter) AppendMessages(ctx context.Context, threadID string, msgs ...*runtimev1.Message) error {
	return a.s.store.AppendMessages(ctx, threadID, msgs...)
}

// PutRun implements runtimeloop.Store: a RUNNING run is stored under this
// replica's lease (leases.go).
func (a loopAdapter) PutRun(ctx context.Context, r *runtimev1.Run) error {
	return a.s.putRun(ctx, r)
}

// SetEventSeq implements runtimeloop.EventSeqs: the number is kept on
// the run's row, shared by every replica.
func (a loopAdapter) SetEventSeq(ctx context.Context, threadID, runID string, seq int64) error {
	return a.s.store.SetEventSeq(ctx, threadID, runID, seq)
}

// EventSeq implements runtimeloop.EventSeqs.
func (a loopAdapter) EventSeq(ctx context.Context, threadID, runID string) (int64, error) {
	return a.s.store.EventSeq(ctx, threadID, runID)
}

// GetRun implements runtimeloop.Store.
func (a loopAdapter) GetRun(ctx context.Context, threadID, runID string) (*runtimev1.Run, error) {
	r, err := a.s.store.GetRun(ctx, threadID, runID)
	if errors.Is(err, runtimestore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", runtimeloop.ErrNotFound, err)
	}
	return r, err
}

// ListRuns implements runtimeloop.Store.
func (a loopAdapter) ListRuns(ctx context.Context, threadID string) ([]*runtimev1.Run, error) {
	return a.s.store.ListRuns(ctx, threadID)
}

// AddUsage implements runtimeloop.Store: the thread's token_usage grows
// in a write transaction.
func (a loopAdapter) AddUsage(ctx context.Context, threadID string, u *runtimev1.TokenUsage) error {
	_, err := a.s.store.UpdateThread(ctx, threadID, func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
		tu := t.Proto.GetTokenUsage()
		if tu == nil {
			tu = &runtimev1.TokenUsage{}
			t.Proto.TokenUsage = tu
		}
		tu.InputTokens += u.GetInputTokens()
		tu.OutputTokens += u.GetOutputTokens()
		tu.TotalTokens += u.GetTotalTokens()
		return nil, nil
	})
	return err
}

// CreateChildThread implements runtimeloop.Threads: a thread of the same
// owner (the effective principal) with its own workspace and promotion
// state, marked as a subagent's thread (runtimestore.Child: its calls carry
// is_subagent=true, and ListThreads hides it). Its agent is the parent's
// agent narrowed for the subagent — skills allowlist = spec.Skills (the
// intersection of docs/deerflow.md §1.4), subagents disabled — kept as a
// per-thread override, never stored as an agent (so ListAgents is
// unchanged). The metadata names the parent, for people reading the thread.
func (a loopAdapter) CreateChildThread(ctx context.Context, spec runtimeloop.ChildSpec) (string, error) {
	parent, _, err := a.s.ownThread(ctx, spec.ParentThreadID)
	if err != nil {
		return "", err
	}
	agent, err := a.s.agents.ThreadAgent(ctx, parent)
	if err != nil {
		return "", err
	}
	override := proto.Clone(agent).(*runtimev1.Agent)
	override.Skills, override.SubagentsEnabled = spec.Skills, false
	child := &runtimestore.Child{ParentThreadID: spec.ParentThreadID, ParentRunID: spec.ParentRunID, SubagentType: spec.SubagentType, Agent: override}
	th, err := a.s.createThread(ctx, parent.Proto.GetAgent(), map[string]string{
		"toolplane.parent_thread_id": spec.ParentThreadID, "toolplane.parent_run_id": spec.ParentRunID, "toolplane.subagent_type": spec.SubagentType,
	}, child)
	if err != nil {
		return "", errors.New(status.Convert(err).Message())
	}
	return th.Proto.GetThreadId(), nil
}

// loopMetrics are the agent loop's collectors.
type loopMetrics struct {
	runs       *prometheus.CounterVec
	modelCalls *prometheus.CounterVec
	modelTime  *prometheus.HistogramVec
	tokens     *prometheus.CounterVec
}

func newLoopMetrics(reg prometheus.Registerer) *loopMetrics {
	m := &loopMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_runs_total",
			Help: "Agent-loop runs by final status (waiting_for_input counts each wait), stop reason code and kind (lead, subagent)."}, []string{"status", "reason", "kind"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_model_calls_total",
			Help: "Chat-completion calls by model and result (ok, error)."}, []string{"model", "result"}),
		modelTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolplane_runtime_model_call_seconds",
			Help: "Duration of chat-completion calls (whole streamed response).", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_model_tokens_total",
			Help: "Tokens reported by the model provider, by model and direction (input, output)."}, []string{"model", "direction"}),
	}
	if reg == nil {
		return m
	}
	m.runs = register(reg, m.runs)
	m.modelCalls = register(reg, m.modelCalls)
	m.modelTime = register(reg, m.modelTime)
	m.tokens = register(reg, m.tokens)
	return m
}

// register registers c, or returns the collector already registered under
// its name (a second runtime in one registry, as in tests).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex
			}
		}
	}
	return c
}

// ModelCall implements runtimeloop.Observer.
func (m *loopMetrics) ModelCall(model string, d time.Duration, u *runtimev1.TokenUsage, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.modelCalls.WithLabelValues(model, result).Inc()
	m.modelTime.WithLabelValues(model).Observe(d.Seconds())
	if u != nil {
		m.tokens.WithLabelValues(model, "input").Add(float64(u.GetInputTokens()))
		m.tokens.WithLabelValues(model, "output").Add(float64(u.GetOutputTokens()))
	}
}

// RunEnded implements runtimeloop.Observer; the reason label is the stop
// reason's code (the text before ':'), so its cardinality stays small.
func (m *loopMetrics) RunEnded(st runtimev1.RunStatus, reason string, subagent bool) {
	code, _, _ := strings.Cut(reason, ":")
	if len(code) > 40 || strings.Contains(code, " ") {
		code = "other"
	}
	kind := "lead"
	if subagent {
		kind = "subagent"
	}
	m.runs.WithLabelValues(strings.ToLower(strings.TrimPrefix(st.String(), "RUN_STATUS_")), code, kind).Inc()
}
