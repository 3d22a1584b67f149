package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// messageMode says whether execute stores the result's tool message.
type messageMode int

const (
	// storeMessage commits the tool message with the state update
	// (ExecuteToolCall, ExecuteToolCallStream).
	storeMessage messageMode = iota
	// returnOnly commits the state update only; the caller stores the
	// message (the agent loop, so parallel results land in call order).
	returnOnly
)

// readMark is a read_file mark (path, SHA-256 of the full content).
type readMark struct{ path, digest string }

// outcome is what one step of the chain produced.
type outcome struct {
	text       string
	content    []*typev1.ContentBlock // MCP results (text is then unused)
	structured *structpb.Struct
	kind       runtimev1.ErrorKind // UNSPECIFIED = success
	reason     string              // POLICY reason code
	artifacts  []*runtimev1.Artifact
	promoted   *runtimev1.Promoted
	readMark   *readMark
	activate   *runtimev1.ActiveSkill
}

// execCtx is one tool call in flight.
type execCtx struct {
	thread *runtimestore.Thread
	view   *view
	name   string
	callID string
	runID  string
	args   map[string]any
	argsPB *structpb.Struct
	notify func(*typev1.Notification) // streaming only
}

const recoverySentence = "Continue with the information you have, or try a different approach or tool."

// maxDetail bounds error details (deerflow-reference §7).
const maxDetail = 500

func truncDetail(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= maxDetail {
		return s
	}
	r := []rune(s)
	return string(r[:maxDetail-3]) + "..."
}

func policyErr(reason, format string, args ...any) *outcome {
	return &outcome{kind: runtimev1.ErrorKind_ERROR_KIND_POLICY, reason: reason, text: fmt.Sprintf(format, args...)}
}

// upstreamFailure wraps an upstream error as a RUNTIME failure of the tool.
func upstreamFailure(svc string, err error) error {
	return fmt.Errorf("%s %s: %s", svc, status.Code(err), status.Convert(err).Message())
}

// ExecuteToolCall runs one tool call through the chain of ARCHITECTURE §3.2.
func (s *Server) ExecuteToolCall(ctx context.Context, req *runtimev1.ExecuteToolCallRequest) (*runtimev1.ExecuteToolCallResponse, error) {
	res, err := s.execute(ctx, req.GetThreadId(), req.GetRunId(), req.GetToolCall(), nil, storeMessage)
	if err != nil {
		return nil, err
	}
	return &runtimev1.ExecuteToolCallResponse{Result: res}, nil
}

// ExecuteToolCallStream is ExecuteToolCall relaying MCP progress and log
// notifications before the result.
func (s *Server) ExecuteToolCallStream(req *runtimev1.ExecuteToolCallStreamRequest, stream grpc.ServerStreamingServer[runtimev1.ExecuteToolCallStreamResponse]) error {
	notify := func(n *typev1.Notification) {
		_ = stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Notification{Notification: n}})
	}
	res, err := s.execute(stream.Context(), req.GetThreadId(), req.GetRunId(), req.GetToolCall(), notify, storeMessage)
	if err != nil {
		return err
	}
	return stream.Send(&runtimev1.ExecuteToolCallStreamResponse{Event: &runtimev1.ExecuteToolCallStreamResponse_Result{Result: res}})
}

// execute is the chain, outer to inner (ARCHITECTURE §3.2, deerflow-reference
// §6.1): output budget → result sanitisation → authz Authorize →
// read-before-write → error normalisation → skill policy → deferred filter →
// dispatch; then the state update is committed in one transaction, with
// the result's tool message when msg is storeMessage (the public RPCs) and
// without it when msg is returnOnly (the agent loop, which stores the
// results of a step itself, in call order). Tool failures are results;
// only a missing thread or a store failure is an RPC error.
func (s *Server) execute(ctx context.Context, threadID, runID string, call *runtimev1.ToolCall, notify func(*typev1.Notification), msg messageMode) (*runtimev1.ToolResult, error) {
	th, _, err := s.ownThread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	ec := &execCtx{thread: th, name: call.GetName(), callID: call.GetId(), runID: runID, argsPB: call.GetArguments(), notify: notify}
	if ec.callID == "" {
		ec.callID = "missing_tool_call_id"
	}
	if ec.name == "" {
		ec.name = "unknown_tool"
	}
	var o *outcome
	b, berr := s.baseWithRetry(ctx, th)
	switch {
	case berr != nil:
		// Without an assembly nothing is known to be allowed: fail closed.
		o = policyErr("assembly.failed", "Error: Tool '%s' cannot run now: %s. %s", ec.name, truncDetail(status.Convert(berr).Message()), recoverySentence)
	default:
		ec.view = s.makeView(ctx, th, b)
		o = s.chain(ctx, ec, call)
	}
	// Result sanitisation (remote content), then the output budget: both
	// apply to every result, denials included.
	s.sanitise(ec, o)
	s.budget(ec, o)
	res := s.toResult(ec, o)
	s.metrics.toolCalls.WithLabelValues(sourceOf(ec), strings.TrimPrefix(res.Status.String(), "TOOL_CALL_STATUS_"), strings.TrimPrefix(res.ErrorKind.String(), "ERROR_KIND_")).Inc()
	if err := s.commit(ctx, ec, o, res, msg == storeMessage); err != nil {
		return nil, err
	}
	return res, nil
}

func sourceOf(ec *execCtx) string {
	if ec.view == nil {
		return "unknown"
	}
	if ec.name == toolSearchName && ec.view.base.hasDeferred() {
		return sourceBuiltin
	}
	if t := ec.view.base.byName[ec.name]; t != nil {
		return t.source
	}
	return "unknown"
}

// chain runs authz → read-before-write → error normalisation → skill
// policy → deferred filter → dispatch.
func (s *Server) chain(ctx context.Context, ec *execCtx, call *runtimev1.ToolCall) *outcome {
	v := ec.view
	// Malformed arguments are the model's mistake: a BUSINESS error it can fix.
	if call.GetArguments() == nil && strings.TrimSpace(call.GetRawArguments()) != "" {
		var probe map[string]any
		if err := json.Unmarshal([]byte(call.GetRawArguments()), &probe); err != nil {
			return &outcome{kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, text: fmt.Sprintf("Error: Tool '%s' arguments are not a valid JSON object: %s. Send the arguments as one JSON object.", ec.name, truncDetail(err.Error()))}
		}
		pb, err := structpb.NewStruct(probe)
		if err != nil {
			return &outcome{kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, text: fmt.Sprintf("Error: Tool '%s' arguments are not a valid JSON object: %s.", ec.name, truncDetail(err.Error()))}
		}
		ec.argsPB = pb
	}
	if ec.argsPB == nil {
		ec.argsPB = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	ec.args = ec.argsPB.AsMap()

	// Authz layer 2. tool_search is exempt only when this assembly has a
	// deferred set (deerflow-reference §3.7).
	if !(ec.name == toolSearchName && v.base.hasDeferred()) {
		if o := s.authorize(ctx, ec); o != nil {
			return o
		}
	}
	// Read-before-write gate, serialised with the write per (thread, path).
	if t := v.base.byName[ec.name]; t != nil && t.source == sourceConfig && (t.use == "file.write" || t.use == "file.str_replace") {
		if clean, _, err := cleanVirtual(strArg(ec.args, "path"), true); err == nil {
			unlock := s.locks.lock(ec.thread.Proto.GetThreadId() + "\x00" + clean)
			defer unlock()
			cur, err := s.currentDigest(ec.thread.Proto.GetThreadId(), clean)
			if err == nil && cur != "" && ec.thread.ReadMarks[clean] != cur {
				return policyErr("read_before_write.unread", "Error: %s blocked: %s exists and its current version has not been read. Call read_file on %s first (a line range is enough), then retry.", ec.name, clean, clean)
			}
		}
	}
	// Error normalisation around the inner steps.
	o, err := s.inner(ctx, ec)
	if err != nil {
		var be *errBusiness
		if errors.As(err, &be) {
			return &outcome{kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, text: "Error: " + truncDetail(be.msg)}
		}
		kind := "Exception"
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			kind = st.Code().String()
		} else if errors.Is(err, context.DeadlineExceeded) {
			kind = "Timeout"
		}
		detail := truncDetail(err.Error())
		if detail == "" {
			detail = kind
		}
		return &outcome{kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, text: fmt.Sprintf("Error: Tool '%s' failed with %s: %s. %s", ec.name, kind, detail, recoverySentence)}
	}
	return o
}

// authorize asks authz whether the call may run; any failure denies.
func (s *Server) authorize(ctx context.Context, ec *execCtx) *outcome {
	resp, err := s.authz.Authorize(actingFor(ctx), &authzv1.AuthorizeRequest{
		Principal: principalOf(ctx), ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL,
		Target: ec.name, CallContext: callContext(ec.thread, ec.view.base.agent, ec.runID, ec.callID), Input: ec.argsPB,
	})
	if err != nil {
		return policyErr("authz.evaluator_error", "Guardrail denied: tool '%s' was not run (authz.evaluator_error): the authorization service could not decide (%s), so the call is refused. Choose another approach.", ec.name, status.Code(err))
	}
	d := resp.GetDecision()
	if d.GetAllow() {
		return nil
	}
	code, msg := "authz.denied", "blocked by policy"
	if len(d.GetReasons()) > 0 {
		code = firstNonEmpty(d.GetReasons()[0].GetCode(), code)
		msg = firstNonEmpty(d.GetReasons()[0].GetMessage(), msg)
	}
	return policyErr(code, "Guardrail denied: tool '%s' was not run (%s): %s. Choose another approach.", ec.name, code, truncDetail(msg))
}

// inner runs skill policy → deferred filter → dispatch. Errors are
// normalised by the caller.
func (s *Server) inner(ctx context.Context, ec *execCtx) (*outcome, error) {
	v := ec.view
	isSearch := ec.name == toolSearchName && v.base.hasDeferred()
	t := v.base.byName[ec.name]
	if t == nil && !isSearch {
		return policyErr("tool.unknown", "Error: Tool '%s' is not available in this thread. Available tools: %s.", ec.name, availableList(v)), nil
	}
	if !v.allows(ec.name) {
		return policyErr("skill_policy.denied", "Error: Tool '%s' is not allowed by the active skill policy (%s). Use one of the tools the skill allows.", ec.name, strings.Join(v.policy.skills, ", ")), nil
	}
	if v.hidden(ec.name) {
		return policyErr("deferred.not_promoted", "Error: Tool '%s' is deferred and has not been loaded yet, so it was not run. Call tool_search first (for example with the query \"select:%s\"), then retry this call.", ec.name, ec.name), nil
	}
	if isSearch {
		return s.toolSearch(ctx, ec)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ToolCallTimeout)
	defer cancel()
	switch t.source {
	case sourceConfig:
		switch t.use {
		case "file.read":
			return s.readFile(cctx, ec, ec.args)
		case "file.write":
			return s.writeFile(cctx, ec, ec.args)
		case "file.ls":
			return s.ls(cctx, ec, ec.args)
		case "file.str_replace":
			return s.strReplace(cctx, ec, ec.args)
		case "bash":
			return s.bash(cctx, ec, ec.args)
		}
	case sourceBuiltin:
		switch t.use {
		case askClarification:
			return s.askClarification(ec)
		case presentFiles:
			return s.presentFiles(cctx, ec, ec.args)
		case describeSkill:
			return s.describeSkill(cctx, ec)
		case reviewSkillPackage:
			return s.reviewSkill(cctx, ec)
		case taskTool:
			return nil, business("the task tool needs the agent loop (RunTurn); it cannot run through ExecuteToolCall")
		}
	case sourceMCP:
		return s.callMCP(ctx, ec)
	}
	return nil, fmt.Errorf("no implementation for %s", ec.name)
}

func availableList(v *view) string {
	bound, _ := v.boundTools()
	names := make([]string, 0, len(bound))
	for _, t := range bound {
		names = append(names, t.name)
	}
	sort.Strings(names)
	if len(names) > 30 {
		return strings.Join(names[:30], ", ") + fmt.Sprintf(" and %d more", len(names)-30)
	}
	return strings.Join(names, ", ")
}

// callMCP calls a catalog tool with the thread's CallContext, relaying
// notifications when streaming.
func (s *Server) callMCP(ctx context.Context, ec *execCtx) (*outcome, error) {
	cc := callContext(ec.thread, ec.view.base.agent, ec.runID, ec.callID)
	var resp *catalogv1.CallToolResponse
	if ec.notify == nil {
		r, err := s.catalog.CallTool(actingFor(ctx), &catalogv1.CallToolRequest{Name: ec.name, Arguments: ec.argsPB, CallContext: cc})
		if err != nil {
			return nil, err
		}
		resp = r
	} else {
		cctx, cancel := context.WithTimeout(actingFor(ctx), s.cfg.ToolCallTimeout)
		defer cancel()
		stream, err := s.catalog.CallToolStream(cctx, &catalogv1.CallToolStreamRequest{Name: ec.name, Arguments: ec.argsPB, CallContext: cc})
		if err != nil {
			return nil, err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			if n := m.GetNotification(); n != nil {
				ec.notify(n)
				continue
			}
			if r := m.GetResult(); r != nil {
				resp = r
				break
			}
		}
	}
	o := &outcome{content: resp.GetContent(), structured: resp.GetStructuredContent()}
	if resp.GetIsError() {
		o.kind = runtimev1.ErrorKind_ERROR_KIND_BUSINESS
		txt := textOf(resp.GetContent())
		if !strings.HasPrefix(txt, "Error:") {
			o.content = append([]*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "Error: the tool reported a failure."}}, o.content...)
		}
	}
	return o, nil
}

func textOf(blocks []*typev1.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
			parts = append(parts, b.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

// sanitise neutralises framework tags in results of remote tools (MCP) and
// of skill reviews; local tool results are left as they are
// (deerflow-reference §6.2 ToolResultSanitization, widened to every MCP tool).
func (s *Server) sanitise(ec *execCtx, o *outcome) {
	if ec.view == nil {
		return
	}
	t := ec.view.base.byName[ec.name]
	if t == nil || !(t.source == sourceMCP || t.use == reviewSkillPackage) {
		return
	}
	o.text = neutralise(o.text)
	for _, b := range o.content {
		if b.GetText() != "" {
			b.Text = neutralise(b.GetText())
		}
	}
}

func (s *Server) toResult(ec *execCtx, o *outcome) *runtimev1.ToolResult {
	res := &runtimev1.ToolResult{ToolCallId: ec.callID, Name: ec.name, Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS,
		ErrorKind: o.kind, ReasonCode: o.reason, Artifacts: o.artifacts, Promoted: o.promoted, StructuredContent: o.structured, Content: o.content}
	if o.kind != runtimev1.ErrorKind_ERROR_KIND_UNSPECIFIED {
		res.Status = runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR
	}
	if res.Content == nil {
		// Files and command output may hold any bytes; protobuf strings must
		// be UTF-8, so invalid sequences become U+FFFD.
		res.Content = []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: strings.ToValidUTF8(o.text, "\uFFFD")}}
	}
	return res
}

// commit writes the call's state update (promotions through the reducer,
// artifacts, read marks, skill activation) and, when withMsg, the tool
// message in one transaction.
func (s *Server) commit(ctx context.Context, ec *execCtx, o *outcome, res *runtimev1.ToolResult, withMsg bool) error {
	msg := &runtimev1.Message{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: textOf(res.Content), ToolCallId: ec.callID,
		Name: ec.name, Status: res.Status, RunId: ec.runID}
	_, err := s.store.UpdateThread(context.WithoutCancel(ctx), ec.thread.Proto.GetThreadId(), func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
		if o.promoted != nil {
			t.Proto.Promoted = runtimestore.MergePromoted(t.Proto.Promoted, o.promoted)
		}
		if len(o.artifacts) > 0 {
			t.Proto.Artifacts = runtimestore.MergeArtifacts(t.Proto.Artifacts, o.artifacts)
		}
		if o.readMark != nil {
			t.ReadMarks[o.readMark.path] = o.readMark.digest
		}
		if a := o.activate; a != nil {
			t.Proto.ActiveSkills = slices.DeleteFunc(t.Proto.ActiveSkills, func(x *runtimev1.ActiveSkill) bool {
				return x.GetSource() == a.GetSource() && x.GetPath() == a.GetPath()
			})
			t.Proto.ActiveSkills = append(t.Proto.ActiveSkills, a)
		}
		if !withMsg {
			return nil, nil
		}
		return []*runtimev1.Message{msg}, nil
	})
	if errors.Is(err, runtimestore.ErrNotFound) {
		return threadNotFound(ec.thread.Proto.GetThreadId())
	}
	if err != nil {
		return storeErr(err)
	}
	return nil
}
