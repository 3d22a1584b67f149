package runtime

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns INVALID_ARGUMENT with an ErrorInfo and
// a google.rpc.BadRequest naming the field and the reason, or nil.
func (s *Server) Validate(_ string, req any) error {
	if r, ok := req.(interface{ GetThreadId() string }); ok && r.GetThreadId() == "" {
		return invalid("thread_id", grpcx.ViolationRequired, "must not be empty")
	}
	if r, ok := req.(interface{ GetPageSize() int32 }); ok && (r.GetPageSize() < 0 || r.GetPageSize() > 1000) {
		return invalid("page_size", grpcx.ViolationOutOfRange, "%d is outside 0..1000", r.GetPageSize())
	}
	if r, ok := req.(interface{ GetProfile() runtimev1.ToolProfile }); ok {
		if _, known := runtimev1.ToolProfile_name[int32(r.GetProfile())]; !known {
			return invalid("profile", grpcx.ViolationInvalid, "%d is not a ToolProfile", r.GetProfile())
		}
	}
	switch r := req.(type) {
	case *runtimev1.CreateThreadRequest:
		if r.GetAgent() != "" && !agentNameRE.MatchString(r.GetAgent()) {
			return invalid("agent", grpcx.ViolationInvalid, "%q must be 1..64 of [a-z0-9-]", r.GetAgent())
		}
		if len(r.GetMetadata()) > 32 {
			return invalid("metadata", grpcx.ViolationTooMany, "at most 32 entries, got %d", len(r.GetMetadata()))
		}
		for k, v := range r.GetMetadata() {
			if len(k) > 128 || len(v) > 4096 {
				return invalid(fmt.Sprintf("metadata[%q]", k), grpcx.ViolationTooLong, "keys up to 128 bytes, values up to 4096 bytes")
			}
		}
	case *runtimev1.AssembleToolsRequest:
		if err := s.cfg.textLimit("user_message", r.GetUserMessage()); err != nil {
			return err
		}
		if !utf8.ValidString(r.GetUserMessage()) {
			return invalid("user_message", grpcx.ViolationInvalidUTF8, "not valid UTF-8")
		}
		if len(r.GetDeferredView()) > 128 {
			return invalid("deferred_view", grpcx.ViolationTooLong, "longer than 128 characters")
		}
		if len(r.GetDeferredToolsView()) > 128 {
			return invalid("deferred_tools_view", grpcx.ViolationTooLong, "longer than 128 characters")
		}
	case *runtimev1.ExecuteToolCallRequest:
		return s.validateCall(r.GetToolCall())
	case *runtimev1.ExecuteToolCallStreamRequest:
		return s.validateCall(r.GetToolCall())
	case *runtimev1.RunTurnRequest:
		return s.cfg.textLimit("message", r.GetMessage())
	case *runtimev1.ResumeRunRequest:
		return s.cfg.textLimit("answer", r.GetAnswer())
	case *runtimev1.GetAgentRequest:
		if r.GetName() == "" {
			return invalid("name", grpcx.ViolationRequired, "must not be empty")
		}
	case *runtimev1.DeleteAgentRequest:
		if r.GetName() == "" {
			return invalid("name", grpcx.ViolationRequired, "must not be empty")
		}
		if r.GetName() == defaultAgentName {
			return nil // a stored "default" can be deleted; the built-in stays
		}
	case *runtimev1.ConnectMyServerRequest:
		return validServerName(r.GetName())
	case *runtimev1.DisconnectMyServerRequest:
		return validServerName(r.GetName())
	case *runtimev1.UpsertAgentRequest:
		a := r.GetAgent()
		if a == nil {
			return invalid("agent", grpcx.ViolationRequired, "required")
		}
		if p := agentProblem(a); p != nil {
			return invalid("agent."+p.field, p.why, "%s", p.msg)
		}
	}
	return nil
}

// validateCall checks a tool call of a request, the arguments against
// runtime.limits.tool_arguments before any decoding or upstream call
// (runtimechain.CheckArguments; the chain's input_budget step applies the
// same bounds to the agent loop's calls).
func (s *Server) validateCall(c *runtimev1.ToolCall) error {
	if c == nil {
		return invalid("tool_call", grpcx.ViolationRequired, "required")
	}
	if len(c.GetName()) > 256 {
		return invalid("tool_call.name", grpcx.ViolationTooLong, "longer than 256 characters")
	}
	// The id keys the call's stored result (docs/decisions/0082-idempotent-tool-calls.md).
	if id := c.GetId(); len(id) > 256 {
		return invalid("tool_call.id", grpcx.ViolationTooLong, "longer than 256 bytes")
	} else if !utf8.ValidString(id) {
		return invalid("tool_call.id", grpcx.ViolationInvalidUTF8, "not valid UTF-8")
	} else if strings.ContainsFunc(id, unicode.IsControl) {
		return invalid("tool_call.id", grpcx.ViolationInvalid, "contains a control character")
	}
	if e := runtimechain.CheckArguments(s.cfg.argumentLimits(), c.GetRawArguments(), c.GetArguments()); e != nil {
		field := "tool_call.raw_arguments"
		if c.GetArguments() != nil {
			field = "tool_call.arguments"
		}
		return limitErr(field, e)
	}
	return nil
}
