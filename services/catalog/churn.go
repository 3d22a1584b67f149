package catalog

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// churnGuard is the stability guard for tool definitions
// (docs/decisions/0097-definition-churn-guard.md). A server that changes a
// tool's definition on every tools/list (a counter or a timestamp in the
// description) would change what the runtime binds every turn: the
// provider's prompt cache breaks each turn and, with per-tool definition
// hashes, the thread's promotion of the tool is dropped each turn. When a
// tool of an unpinned server changed catalog.definition_churn.changes times
// within .window, the guard keeps the definition bound until then (so what
// the providers cached stays valid) until the current one has stayed
// unchanged for .settle; it says so in the tool's problems, logs a warning
// naming server and tool, and counts
// toolplane_catalog_definition_churn_total{server}. Calls go to the same
// tool (server and name are unchanged). Pinned servers hold changes for
// review already and static catalogs do not list, so both are left alone.
// It is used only from rebuild, under buildMu.
type churnGuard struct {
	tools map[churnKey]*churnState
	// seen marks the keys observed by the current rebuild (the others are
	// forgotten at its end: the tool is gone).
	seen  map[churnKey]bool
	timer *time.Timer
}

type churnKey struct{ server, origin, tool string }

type churnState struct {
	hash    string      // definition hash of the current definition
	since   time.Time   // when the current definition was first seen
	changes []time.Time // changes within the window
	bound   *base       // the definition bound (the current one unless held)
	// held is the definition bound while churning, with the churn problem
	// added (nil: not churning).
	held *base
}

// churnHash is the definition hash of b under its original name, computed
// once per base (a base is one definition as listed).
func (b *base) churnHash() string {
	b.churnOnce.Do(func() { _, b.churnSum = b.definition(b.def.Name) })
	return b.churnSum
}

// begin starts a rebuild's pass.
func (g *churnGuard) begin() {
	if g.tools == nil {
		g.tools = map[churnKey]*churnState{}
	}
	g.seen = map[churnKey]bool{}
}

// end forgets the tools the rebuild did not see.
func (g *churnGuard) end() {
	for k := range g.tools {
		if !g.seen[k] {
			delete(g.tools, k)
		}
	}
}

// bindStable returns the base to bind for b, a tool of server st, at now.
func (s *Server) bindStable(st *catalogmcp.Status, b *base, pinned bool, now time.Time) *base {
	g, cfg := &s.churn, s.cfg.DefinitionChurn
	if cfg.Changes < 0 || pinned || st.Type == catalogconfig.TypeStatic {
		return b
	}
	k := churnKey{st.Name, b.def.Origin, b.def.Name}
	if g.seen[k] {
		return b // a name the server listed twice: not one definition changing
	}
	g.seen[k] = true
	h := b.churnHash()
	c := g.tools[k]
	if c == nil {
		g.tools[k] = &churnState{hash: h, since: now, bound: b}
		return b
	}
	if h != c.hash {
		c.hash, c.since = h, now
		c.changes = append(c.changes, now)
		if len(c.changes) > cfg.Changes {
			// Only the last `changes` matter: memory stays bounded for a
			// server flipping thousands of tools every second.
			c.changes = c.changes[len(c.changes)-cfg.Changes:]
		}
	}
	kept := c.changes[:0]
	for _, t := range c.changes {
		if now.Sub(t) < cfg.Window {
			kept = append(kept, t)
		}
	}
	c.changes = kept
	switch {
	case c.held == nil && len(c.changes) >= cfg.Changes:
		held := c.bound.cloneDef()
		held.problems = append(held.problems, fmt.Sprintf(
			"definition churn: the server changed this definition %d times within %s; the one bound before stays bound until the server's current one stays unchanged for %s (catalog.definition_churn)",
			len(c.changes), cfg.Window, cfg.Settle))
		c.held = held
		s.met.churned.WithLabelValues(st.Name).Inc()
		s.log.Warn("catalog: a tool definition keeps changing; the definition bound before stays bound until it settles",
			"server", st.Name, "tool", b.def.Name, "changes", len(c.changes), "window", cfg.Window, "settle", cfg.Settle)
	case c.held != nil && now.Sub(c.since) >= cfg.Settle:
		c.held, c.changes = nil, nil
		s.log.Info("catalog: a churning tool definition settled; the current one is bound", "server", st.Name, "tool", b.def.Name)
	}
	if c.held == nil {
		c.bound = b
		return b
	}
	c.held.routing = b.routing
	// Look again when the current definition will have settled.
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timer = time.AfterFunc(cfg.Settle-now.Sub(c.since)+10*time.Millisecond, func() {
		select {
		case <-s.stop:
		default:
			s.rebuild()
		}
	})
	return c.held
}

// cloneDef copies the definition part of b (not its caches).
func (b *base) cloneDef() *base {
	return &base{def: b.def, problems: append([]string(nil), b.problems...), routing: b.routing}
}
