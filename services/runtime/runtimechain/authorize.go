package runtimechain

import (
	"context"

	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// Authorization is authz layer 2: Authorize(tool, call) for the effective
// principal with the thread's CallContext, the arguments and the tool's
// resource attributes (server, MCP annotations from the catalog); any failure
// denies (fail closed), every deny is audited by authz. tool_search is
// exempt only when the assembly has a deferred set (docs/deerflow.md
// §3.7). It sits outside the skill-policy and deferred steps, so a caller
// asking for a tool it may never see is refused here (authz.denied) and
// audited.
type Authorization struct{ Authz Authorizer }

// Name implements Step.
func (Authorization) Name() string { return "authorization" }

// Description implements Step.
func (Authorization) Description() string {
	return "authz Authorize(tool, call) for the principal; any failure denies; tool_search exempt when tools are deferred"
}

// Run implements Step.
func (s Authorization) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.IsToolSearch() {
		return next(ctx, c)
	}
	resp, err := s.Authz.Authorize(runtimeident.ActingFor(ctx), &authzv1.AuthorizeRequest{
		Principal: runtimeident.Principal(ctx), ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL,
		Target: c.Name, CallContext: runtimeident.CallContext(c.Thread, c.View.Base.Agent, c.RunID, c.CallID), Input: c.ArgsPB,
		ResourceAttributes: c.Tool().ResourceAttributes(),
	})
	if err != nil {
		return PolicyErr("authz.evaluator_error", "Guardrail denied: tool '%s' was not run (authz.evaluator_error): the authorization service could not decide (%s), so the call is refused. Choose another approach.", c.Name, status.Code(err)), nil
	}
	d := resp.GetDecision()
	if d.GetAllow() {
		if o := s.authorizeACPAgent(ctx, c); o != nil {
			return o, nil
		}
		return next(ctx, c)
	}
	code, msg := "authz.denied", "blocked by policy"
	if len(d.GetReasons()) > 0 {
		code = firstNonEmpty(d.GetReasons()[0].GetCode(), code)
		msg = firstNonEmpty(d.GetReasons()[0].GetMessage(), msg)
	}
	return PolicyErr(code, "Guardrail denied: tool '%s' was not run (%s): %s. Choose another approach.", c.Name, code, TruncDetail(msg)), nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
