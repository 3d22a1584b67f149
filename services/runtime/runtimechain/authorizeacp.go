package runtimechain

import (
	"context"
	"slices"

	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// authorizeACPAgent authorizes the agent an invoke_acp_agent call names:
// Authorize(acp_agent:<agent>, call) after the tool itself was allowed, so
// an agent the principal may not call is refused even when the model names
// it outside the enum it was shown (docs/decisions/0156-acp-agents-authorized-by-the-runtime.md).
// A name that is not one of the tool's agents is left to the tool, which
// refuses it without running anything. nil = allowed.
func (s Authorization) authorizeACPAgent(ctx context.Context, c *Call) *Outcome {
	t := c.Tool()
	if t == nil || t.Source != runtimeassembly.SourceACP {
		return nil
	}
	agent, _ := c.Args["agent"].(string)
	if !slices.Contains(t.ACPAgents, agent) {
		return nil
	}
	resp, err := s.Authz.Authorize(runtimeident.ActingFor(ctx), &authzv1.AuthorizeRequest{
		Principal: runtimeident.Principal(ctx), ResourceType: authzv1.ResourceType_RESOURCE_TYPE_ACP_AGENT, Action: authzv1.Action_ACTION_CALL,
		Target: agent, CallContext: runtimeident.CallContext(c.Thread, c.View.Base.Agent, c.RunID, c.CallID), Input: c.ArgsPB,
	})
	if err != nil {
		return PolicyErr("authz.evaluator_error", "Guardrail denied: ACP agent '%s' was not invoked (authz.evaluator_error): the authorization service could not decide (%s), so the call is refused. Choose another approach.", agent, status.Code(err))
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
	return PolicyErr(code, "Guardrail denied: ACP agent '%s' was not invoked (%s): %s. Choose another approach.", agent, code, TruncDetail(msg))
}
