package runtime

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

func invalid(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns INVALID_ARGUMENT naming the field, or nil.
func (s *Server) Validate(_ string, req any) error {
	if r, ok := req.(interface{ GetThreadId() string }); ok && r.GetThreadId() == "" {
		return status.Error(codes.InvalidArgument, "thread_id: must not be empty")
	}
	if r, ok := req.(interface{ GetPageSize() int32 }); ok && (r.GetPageSize() < 0 || r.GetPageSize() > 1000) {
		return invalid("page_size: %d is outside 0..1000", r.GetPageSize())
	}
	switch r := req.(type) {
	case *runtimev1.CreateThreadRequest:
		if r.GetAgent() != "" && !agentNameRE.MatchString(r.GetAgent()) {
			return invalid("agent: %q must be 1..64 of [a-z0-9-]", r.GetAgent())
		}
		if len(r.GetMetadata()) > 32 {
			return invalid("metadata: at most 32 entries, got %d", len(r.GetMetadata()))
		}
		for k, v := range r.GetMetadata() {
			if len(k) > 128 || len(v) > 4096 {
				return invalid("metadata[%q]: keys up to 128 bytes, values up to 4096 bytes", k)
			}
		}
	case *runtimev1.AssembleToolsRequest:
		if len(r.GetUserMessage()) > 1<<20 {
			return invalid("user_message: longer than 1 MiB")
		}
		if !utf8.ValidString(r.GetUserMessage()) {
			return invalid("user_message: not valid UTF-8")
		}
	case *runtimev1.ExecuteToolCallRequest:
		return validateCall(r.GetToolCall())
	case *runtimev1.ExecuteToolCallStreamRequest:
		return validateCall(r.GetToolCall())
	case *runtimev1.GetAgentRequest:
		if r.GetName() == "" {
			return invalid("name: must not be empty")
		}
	case *runtimev1.DeleteAgentRequest:
		if r.GetName() == "" {
			return invalid("name: must not be empty")
		}
		if r.GetName() == defaultAgentName {
			return nil // a stored "default" can be deleted; the built-in stays
		}
	case *runtimev1.UpsertAgentRequest:
		a := r.GetAgent()
		if a == nil {
			return invalid("agent: required")
		}
		if !agentNameRE.MatchString(a.GetName()) {
			return invalid("agent.name: %q must be 1..64 of [a-z0-9-]", a.GetName())
		}
		if len(a.GetDescription()) > 1024 {
			return invalid("agent.description: longer than 1024 characters")
		}
		if len(a.GetSystemPrompt()) > 64<<10 {
			return invalid("agent.system_prompt: longer than 64 KiB")
		}
		for i, sv := range a.GetToolSearch().GetExemptServers() {
			if sv == "" {
				return invalid("agent.tool_search.exempt_servers[%d]: must not be empty", i)
			}
		}
		for i, g := range a.GetToolGroups().GetValues() {
			if g == "" {
				return invalid("agent.tool_groups.values[%d]: must not be empty", i)
			}
		}
		for i, g := range a.GetSkills().GetValues() {
			if g == "" {
				return invalid("agent.skills.values[%d]: must not be empty", i)
			}
		}
	}
	return nil
}

func validateCall(c *runtimev1.ToolCall) error {
	if c == nil {
		return invalid("tool_call: required")
	}
	if len(c.GetName()) > 256 {
		return invalid("tool_call.name: longer than 256 characters")
	}
	if len(c.GetRawArguments()) > 4<<20 {
		return invalid("tool_call.raw_arguments: longer than 4 MiB")
	}
	return nil
}
