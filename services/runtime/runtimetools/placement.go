package runtimetools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc/metadata"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// Session placement over several catalog replicas
// (docs/decisions/0086-session-placement.md): a call of a per_user,
// per_thread or per_tenant server carries its scope key, a call of a
// stateful server the server's name, as the placement key of the catalog
// connection's balancer (grpcx.WithPlacementKey), so every call of one
// scope reaches the one replica that holds its MCP session.

// placementKey is the placement key of a call of t by the acting-for
// principal of ctx on thread: the catalog's scope key of the call
// (services/catalog/tools.go, catalogmcp.ScopeKey) reduced as its server's
// scope reduces it, NUL-separated; the server's name for a stateful
// server; "" for a shared server (any replica).
func placementKey(ctx context.Context, t *runtimeassembly.Tool, thread string) string {
	if t == nil || t.Server == "" {
		return ""
	}
	if t.Stateful {
		return grpcx.StatefulKey(t.Server)
	}
	switch t.Scope {
	case catalogv1.SessionScope_SESSION_SCOPE_PER_TENANT, catalogv1.SessionScope_SESSION_SCOPE_PER_USER, catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD:
	default:
		return "" // shared: every replica runs its own session
	}
	tenant, subject := "default", ""
	if p := auth.EffectivePrincipal(ctx); p != nil {
		if p.GetTenant() != "" {
			tenant = p.GetTenant()
		}
		subject = p.GetSubject()
	}
	switch t.Scope {
	case catalogv1.SessionScope_SESSION_SCOPE_PER_TENANT:
		return "per_tenant\x00" + t.Server + "\x00" + tenant
	case catalogv1.SessionScope_SESSION_SCOPE_PER_USER:
		return "per_user\x00" + t.Server + "\x00" + tenant + "\x00" + subject
	}
	return "per_thread\x00" + t.Server + "\x00" + tenant + "\x00" + subject + "\x00" + thread
}

// placementMemory is how many keys the runtime remembers the replica of
// (an LRU; a forgotten key's next move is not reported as one).
const placementMemory = 4096

// placements remembers the replica that served each recent placement key.
type placements struct {
	once  sync.Once
	cache *lru.Cache[string, string]
}

func (p *placements) get() *lru.Cache[string, string] {
	p.once.Do(func() { p.cache, _ = lru.New[string, string](placementMemory) })
	return p.cache
}

// ReplicaLabel is how a catalog replica is named to a caller that may not
// see the deployment's addresses (a user credential): "catalog-" and the
// first 8 hex digits of the SHA-256 of its address, stable across calls
// and processes, so a user can tell that the replica changed and an
// operator can match it (sha256sum of the address).
func ReplicaLabel(addr string) string {
	if addr == "" {
		return ""
	}
	h := sha256.Sum256([]byte(addr))
	return "catalog-" + hex.EncodeToString(h[:4])
}

// revealsAddresses reports whether the caller of ctx may see catalog
// replica addresses: a service credential or an admin. Users see labels.
func revealsAddresses(ctx context.Context) bool {
	id, ok := auth.Caller(ctx)
	return ok && (id.Kind == auth.KindService || id.Admin())
}

// report builds the ToolPlacement of a finished call: the replica the
// balancer picked, its owner, the previous replica of the key when it
// moved, and whether the catalog said it created the session (trailer).
// Unless reveal, replicas are named by ReplicaLabel.
func (p *placements) report(key, addr, owner string, trailer metadata.MD, reveal bool) *runtimev1.ToolPlacement {
	if key == "" || addr == "" {
		return nil
	}
	name := func(a string) string { return a }
	if !reveal {
		name = ReplicaLabel
	}
	created := false
	for _, v := range trailer.Get(grpcx.SessionHeader) {
		created = created || v == grpcx.SessionCreated
	}
	out := &runtimev1.ToolPlacement{Replica: name(addr), Owner: name(owner), SessionCreated: created}
	prev, seen := p.get().Get(key)
	p.get().Add(key, addr)
	if seen && prev != addr {
		out.PreviousReplica = name(prev)
		if created {
			out.Note = fmt.Sprintf("session re-created on replica %s; the previous replica %s was unavailable", name(addr), name(prev))
			if addr == owner {
				out.Note = fmt.Sprintf("session re-created on replica %s (the key's owner, available again); the previous replica %s served it while the owner was unavailable", name(addr), name(prev))
			}
		}
	}
	return out
}
