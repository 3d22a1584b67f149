package runtimechain

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// RefusalRecorder writes a refusal to the decision log (authz RecordRefusal).
type RefusalRecorder interface {
	RecordRefusal(ctx context.Context, in *authzv1.RecordRefusalRequest, opts ...grpc.CallOption) (*authzv1.RecordRefusalResponse, error)
}

// RefusalAudit records every refusal the runtime decides itself — a POLICY
// outcome whose reason is not authz's own (unknown tool, deferred tool not
// promoted, skill policy, read-before-write, input budget, assembly
// failure) — as a decision with its reason and principal (authz
// RecordRefusal, kind DECISION_KIND_REFUSAL), and logs it at info.
// Denials by authz are recorded by authz itself and are not repeated. A
// failure to record is logged; the call's answer does not change (it is a
// refusal already). Outermost but one, so it sees every outcome.
type RefusalAudit struct {
	Recorder RefusalRecorder
	Log      *slog.Logger
}

// Name implements Step.
func (RefusalAudit) Name() string { return "refusal_audit" }

// Description implements Step.
func (RefusalAudit) Description() string {
	return "refusals decided by the runtime (not by authz) are recorded as decisions with reason and principal, and logged"
}

// Run implements Step.
func (s RefusalAudit) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	o, err := next(ctx, c)
	if err != nil || o == nil || o.Kind != runtimev1.ErrorKind_ERROR_KIND_POLICY || o.Reason == "" || strings.HasPrefix(o.Reason, "authz.") {
		return o, err
	}
	p := runtimeident.Principal(ctx)
	var agent *runtimev1.Agent
	if c.View != nil {
		agent = c.View.Base.Agent
	}
	if s.Log != nil {
		s.Log.InfoContext(ctx, "tool call refused", "reason", o.Reason, "tool", c.Name, "tenant", p.GetTenant(), "subject", p.GetSubject(), "thread_id", c.ThreadID(), "tool_call_id", c.CallID)
	}
	if s.Recorder == nil {
		return o, nil
	}
	name := c.Name
	if len(name) > 256 {
		name = name[:256]
	}
	_, rerr := s.Recorder.RecordRefusal(runtimeident.ActingFor(context.WithoutCancel(ctx)), &authzv1.RecordRefusalRequest{
		Principal: p, ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: name,
		CallContext: runtimeident.CallContext(c.Thread, agent, c.RunID, c.CallID),
		Reason:      &authzv1.Reason{Code: o.Reason, Message: TruncDetail(o.Text)},
	})
	if rerr != nil && s.Log != nil {
		s.Log.WarnContext(ctx, "refusal not recorded", "reason", o.Reason, "tool", c.Name, "code", status.Code(rerr).String())
	}
	return o, nil
}
