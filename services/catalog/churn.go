package catalog

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// churnGuard is the stability guard for tool definitions
// (docs/decisions/0097-definition-churn-guard.md). A server that changes a
// tool's description on every tools/list (a counter or a timestamp in it)
// would change what the runtime binds every turn: the provider's prompt
// cache breaks each turn and, with per-tool definition hashes, the thread's
// promotion of the tool is dropped each turn. When a tool of an unpinned
// server changed catalog.definition_churn.changes times within .window, the
// guard keeps the title and description bound before until the current
// definition has stayed unchanged for .settle; it says so in the tool's
// problems, logs a warning naming server and tool, and counts
// toolplane_catalog_definition_churn_total{server}.
//
// It holds text only. Everything that decides what the tool does or may be
// allowed to do — name, annotations (authz conditions read them), input
// and output schema, routing — is always the live definition's: when any
// of it differs from the definition bound before, nothing is held, the
// live definition is served (its hash changes, promotions drop) and the
// churn is still reported (decision 0097, addendum). Calls go to the same
// tool (server and name are unchanged). Pinned servers hold changes for
// review already and static catalogs do not list, so both are left alone.
// It is used only from rebuild, under buildMu.
type churnGuard struct {
	tools map[churnKey]*churnState
	// seen marks the keys observed by the current rebuild (the others are
	// forgotten at its end: the tool is gone).
	seen map[churnKey]bool
	// next is the earliest settle deadline among the tools in a churn
	// episode seen by the current rebuild (zero: none), now that rebuild's
	// time; end arms timer at next, so each tool settles at its own
	// deadline.
	next, now time.Time
	timer     *time.Timer
	// fire runs when the timer goes off (a rebuild unless stopping).
	fire func()
	// timerAt is the deadline the timer is armed for (zero: not armed).
	timerAt time.Time
}

type churnKey struct{ server, origin, tool string }

type churnState struct {
	hash    string      // definition hash of the current definition
	since   time.Time   // when the current definition was first seen
	changes []time.Time // changes within the window
	// bound is the live definition whose title and description are served
	// (the current one unless held).
	bound *base
	// held is the definition served while the text is held: the live
	// definition with bound's title and description and the churn problem
	// (nil: not held).
	held *base
	// episode: the tool is in a churn episode (reported once per episode;
	// it ends when the current definition has stayed unchanged for settle).
	episode bool
}

// churnHash is the definition hash of b under its original name, computed
// once per base (a base is one definition as listed).
func (b *base) churnHash() string {
	b.churnOnce.Do(func() { _, b.churnSum = b.definition(b.def.Name) })
	return b.churnSum
}

// behaviourHash is the definition hash of b without its title and
// description: what the guard may never hold (name, schemas, annotations).
// Computed once per base, only for tools in a churn episode.
func (b *base) behaviourHash() string {
	b.behOnce.Do(func() {
		_, b.behSum = definitionOf(DefinitionInput{Name: b.def.Name,
			InputSchema: b.def.InputSchema, OutputSchema: b.def.OutputSchema, Annotations: b.def.Annotations})
	})
	return b.behSum
}

// begin starts a rebuild's pass.
func (g *churnGuard) begin() {
	if g.tools == nil {
		g.tools = map[churnKey]*churnState{}
	}
	g.seen = map[churnKey]bool{}
	g.next = time.Time{}
}

// end forgets the tools the rebuild did not see and arms the settle timer
// at the earliest deadline of the tools still in an episode.
func (g *churnGuard) end() {
	for k := range g.tools {
		if !g.seen[k] {
			delete(g.tools, k)
		}
	}
	if g.next.Equal(g.timerAt) {
		return // armed for it already (or nothing to arm, nothing armed)
	}
	if g.timer != nil {
		g.timer.Stop()
		g.timer, g.timerAt = nil, time.Time{}
	}
	if g.next.IsZero() || g.fire == nil {
		return
	}
	fire := g.fire
	g.timerAt = g.next
	g.timer = time.AfterFunc(g.next.Sub(g.now)+10*time.Millisecond, fire)
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
	g.now = now
	if g.fire == nil {
		g.fire = func() {
			select {
			case <-s.stop:
			default:
				s.rebuild()
			}
		}
	}
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
	if c.episode && now.Sub(c.since) >= cfg.Settle {
		c.held, c.changes, c.episode = nil, nil, false
		s.log.Info("catalog: a churning tool definition settled; the current one is bound", "server", st.Name, "tool", b.def.Name)
	}
	if !c.episode && len(c.changes) >= cfg.Changes {
		c.episode = true
		s.met.churned.WithLabelValues(st.Name).Inc()
		s.log.Warn("catalog: a tool definition keeps changing; its title and description bound before stay bound until it settles, unless what it does changes",
			"server", st.Name, "tool", b.def.Name, "changes", len(c.changes), "window", cfg.Window, "settle", cfg.Settle)
	}
	if !c.episode {
		c.bound = b
		return b
	}
	// Look again when the current definition will have settled.
	if d := c.since.Add(cfg.Settle); g.next.IsZero() || d.Before(g.next) {
		g.next = d
	}
	if b.behaviourHash() != c.bound.behaviourHash() {
		// The name, annotations or a schema changed: what the tool does or
		// may be allowed to do. Never held: the live definition is served
		// and becomes the one whose text is held from now on.
		if c.held != nil {
			s.log.Warn("catalog: a churning tool's annotations or schema changed; the live definition is served",
				"server", st.Name, "tool", b.def.Name)
		}
		c.held, c.bound = nil, b
		live := b.cloneDef()
		live.problems = append(live.problems, fmt.Sprintf(
			"definition churn: the server changed this definition %d times within %s; its annotations or schema changed, so the live definition is served (only title and description are ever held; catalog.definition_churn)",
			len(c.changes), cfg.Window))
		return live
	}
	if c.held == nil || !sameLive(c.held, b) {
		// A new held base rather than a changed one: the served snapshot
		// may be reading the one before.
		held := b.cloneDef()
		held.def.Title, held.def.Description = c.bound.def.Title, c.bound.def.Description
		if !sameLive(held, b) || held.churnHash() != c.bound.churnHash() {
			// By construction the held definition is the live one with the
			// bound text, and (behaviourHash equal) hashes as the bound one.
			// Fail safe: serve the live definition rather than one that is
			// neither.
			s.log.Error("catalog: definition churn guard: the held definition differs from the bound one beyond its text; serving the live definition",
				"server", st.Name, "tool", b.def.Name)
			c.held, c.bound = nil, b
			return b
		}
		held.problems = append(held.problems, fmt.Sprintf(
			"definition churn: the server changed this definition %d times within %s; the title and description bound before stay bound until the server's current one stays unchanged for %s (catalog.definition_churn)",
			len(c.changes), cfg.Window, cfg.Settle))
		c.held = held
	}
	return c.held
}

// sameLive reports whether held was made from the live definition b (the
// parts the guard never holds are b's, byte for byte).
func sameLive(held, b *base) bool {
	return held.routing == b.routing && string(held.def.InputSchema) == string(b.def.InputSchema) &&
		string(held.def.OutputSchema) == string(b.def.OutputSchema) && string(held.def.Annotations) == string(b.def.Annotations) &&
		string(held.def.Meta) == string(b.def.Meta)
}

// cloneDef copies the definition part of b (not its caches).
func (b *base) cloneDef() *base {
	return &base{def: b.def, problems: append([]string(nil), b.problems...), routing: b.routing}
}
