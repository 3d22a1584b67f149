package catalogmcp

import (
	"fmt"
	"slices"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Placement says where a `stateful: true` server runs when several catalog
// replicas share one database (docs/decisions/0086-session-placement.md):
// on exactly one of them, the owner. The other replicas do not start it;
// they list the tools the owner published and refuse its calls with
// NotOwnerError (the runtime's balancer sends them to the owner).
type Placement struct {
	// Remote: the server runs on another replica (or on none yet); this
	// process must not start it.
	Remote bool
	// Owner is the address of the replica that runs it ("" = none yet).
	Owner string
	// Tools are the owner's tools, as it listed them; Listed says the
	// owner has listed them at least once.
	Tools  []ToolDef
	Listed bool
	// Version changes whenever Owner or Tools change (a remote
	// supervisor is replaced when it does).
	Version string
}

func (p Placement) same(o Placement) bool {
	return p.Remote == o.Remote && p.Owner == o.Owner && p.Version == o.Version
}

// NotOwnerError is the error of a call of a stateful server that runs on
// another catalog replica.
type NotOwnerError struct {
	Server, Owner string
}

func (e *NotOwnerError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("stateful server %s runs on no catalog replica yet (taking over)", e.Server)
	}
	return fmt.Sprintf("stateful server %s runs on catalog replica %s", e.Server, e.Owner)
}

// placementOf returns the placement of a server about to be applied: local
// unless it is stateful and ManagerOptions.Placement says otherwise.
func (m *Manager) placementOf(raw *catalogconfig.Server) Placement {
	if !raw.Stateful || m.opts.Placement == nil || !raw.IsEnabled() {
		return Placement{}
	}
	return m.opts.Placement(raw.Name)
}

// Reapply applies the configuration in force again, so that a stateful
// server whose placement changed (ManagerOptions.Placement) starts here,
// stops here, or lists the owner's new tools. Servers whose configuration
// and placement are unchanged keep their supervisors.
// Stateful servers that stopped here are gone when it returns. after, when
// not nil, runs before any other Apply can start, with the names of the
// stateful servers in force (to release the locks of removed ones).
func (m *Manager) Reapply(after func(stateful map[string]bool)) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.RLock()
	servers := make([]catalogconfig.Server, 0, len(m.order))
	for _, s := range m.order {
		servers = append(servers, s.raw.Clone())
	}
	m.mu.RUnlock()
	m.applyLocked(servers)
	if after != nil {
		names := map[string]bool{}
		for _, s := range servers {
			if s.Stateful && s.IsEnabled() {
				names[s.Name] = true
			}
		}
		after(names)
	}
}

// Remote reports whether server is a stateful server that runs on another
// replica, and that replica.
func (m *Manager) Remote(server string) (owner string, remote bool) {
	sup, ok := m.Supervisor(server)
	if !ok || !sup.place.Remote {
		return "", false
	}
	return sup.place.Owner, true
}

// LocalStateful returns the statuses of the stateful servers that run in
// this process (for publishing their tools to the other replicas).
func (m *Manager) LocalStateful() []Status {
	m.mu.RLock()
	sups := slices.Clone(m.order)
	m.mu.RUnlock()
	var out []Status
	for _, s := range sups {
		if s.raw.Stateful && !s.place.Remote {
			out = append(out, s.Status())
		}
	}
	return out
}
