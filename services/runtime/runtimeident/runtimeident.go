// Package runtimeident holds the runtime's view of who a request is for:
// the effective principal, the acting-for metadata sent upstream, and the
// CallContext the runtime attaches to upstream calls (docs/architecture.md
// §5). Every runtime sub-package that calls an upstream uses it, so the
// rules live in one place.
package runtimeident

import (
	"context"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Principal returns the request's effective principal (the default
// principal when auth is off), with tenant "default" when unset.
func Principal(ctx context.Context) *typev1.Principal {
	p := auth.EffectivePrincipal(ctx)
	if p == nil {
		p = auth.DefaultPrincipal()
	}
	if p.Tenant == "" {
		p.Tenant = "default"
	}
	return p
}

// ActingFor returns ctx with outgoing acting-for metadata naming the end
// user of the request in structured form (auth.PrincipalHeader, the
// serialized Principal, never a delimited string; docs/architecture.md §5).
func ActingFor(ctx context.Context) context.Context {
	p := auth.EffectivePrincipal(ctx)
	if p == nil {
		return ctx
	}
	return grpcx.WithPrincipal(ctx, p)
}

// Key is an injective cache key of a principal (its deterministic
// serialization), so that no two principals share an entry.
func Key(p *typev1.Principal) string { return string(auth.EncodePrincipal(p)) }

// CallContext is the CallContext the runtime sends upstream for a thread.
// is_subagent is true on a subagent's thread (runtimestore.Child, written
// only by the runtime, so authz conditions on it can trust it;
// docs/deerflow.md §1.4, §3.7).
func CallContext(th *runtimestore.Thread, agent *runtimev1.Agent, runID, callID string) *typev1.CallContext {
	return &typev1.CallContext{Agent: agent.GetName(), IsSubagent: th.Child != nil, ThreadId: th.Proto.GetThreadId(), RunId: runID, ToolCallId: callID}
}
