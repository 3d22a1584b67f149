package catalog

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// globalScope is the visibility scope of servers every tenant (or several
// tenants) sees (docs/decisions/0100, 0105).
const globalScope = catalognames.GlobalScope

// touchEvery bounds how often last_seen_at of a present pair is rewritten.
const touchEvery = time.Hour

// storeTimeout bounds one identity store operation made from a rebuild.
const storeTimeout = 10 * time.Second

// identity keeps the persisted identity of tools: stable names and pins
// (docs/architecture.md §7, docs/decisions/0100, 0101). Its maps mirror the
// store; writes go to the store first when they decide something durable
// (an approval), or after the in-memory decision when they only record one
// (a new name: a failed write is logged and retried on the next rebuild,
// the name stays reserved in memory).
type identity struct {
	store     catalogstore.IdentityStore
	log       *slog.Logger
	retention time.Duration
	// maxPerServer caps the stored assignments of one server
	// (catalog.max_names_per_server); onEvict (may be nil) is told of each
	// eviction (the toolplane_catalog_names_evicted_total metric).
	maxPerServer int
	onEvict      func(server string, n int)

	mu sync.Mutex
	// names holds every assignment (present or retained) in the form
	// catalognames.AssignStable reads; seen and assigned are the unix times
	// of last_seen_at and assigned_at.
	names    map[catalognames.Key]catalognames.Stored
	seen     map[catalognames.Key]int64
	assigned map[catalognames.Key]int64
	// dirty holds assignments whose write failed, retried on the next assign.
	dirty map[catalognames.Key]bool
	// stale is set when a write failed: another replica sharing the store
	// may have assigned a name first, so the next assign re-reads the
	// store's assignments (theirs win) before deciding.
	stale bool
	pins  map[catalognames.Key]catalogstore.PinRow
}

// pairKey is the store key of k in its stored scope (held under mu).
func (id *identity) pairKey(k catalognames.Key) catalogstore.PairKey {
	sc := id.names[k].Scope
	if sc == "" {
		sc = globalScope
	}
	return catalogstore.PairKey{Scope: sc, Server: k.Server, Tool: k.Tool}
}

// load reads every name and pin of every scope.
func (id *identity) load(ctx context.Context) error {
	id.pins = map[catalognames.Key]catalogstore.PinRow{}
	rows, err := id.store.LoadNames(ctx)
	if err != nil {
		return err
	}
	id.setNames(rows)
	pins, err := id.store.LoadPins(ctx)
	if err != nil {
		return err
	}
	for _, p := range pins {
		k := catalognames.Key{Server: p.Server, Tool: p.Tool}
		if n, ok := id.names[k]; !ok || n.Scope == p.Scope {
			id.pins[k] = p
		}
	}
	return nil
}

// assign names origs keeping every stored assignment, records new ones,
// refreshes last_seen_at of present pairs and prunes pairs absent for longer
// than the retention.
//
// While persist is false (some server has not finished its first connection
// attempt, so pairs that would be assigned first may still be missing), new
// assignments are provisional: computed (config order among new pairs) and
// served, but neither recorded nor written; the first rebuild with every
// server settled records them. provisional[i] reports such a name.
//
// scopes[i] is the visibility scope of origs[i] (catalogconfig.Server.NameScope):
// names are assigned per scope, the global scope winning a conflict
// (catalognames.AssignScoped). A pair whose server moved to another scope
// has its row (and pin) moved. Each server keeps at most maxPerServer
// stored assignments: the oldest retained ones are evicted first, and new
// names of present tools beyond the cap are served but not recorded
// (provisional).
func (id *identity) assign(origs []catalognames.Original, scopes []string, now time.Time, persist bool) (res []catalognames.Stable, provisional []bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.stale {
		id.reloadNames()
	}
	res = catalognames.AssignScoped(origs, scopes, id.names)
	provisional = make([]bool, len(origs))
	unix := now.Unix()
	present := make(map[catalognames.Key]bool, len(origs))
	var upsert []catalogstore.NameRow
	var del []catalogstore.PairKey
	var movedPins []catalogstore.PinRow
	row := func(k catalognames.Key) catalogstore.NameRow {
		s := id.names[k]
		return catalogstore.NameRow{PairKey: id.pairKey(k), Base: s.Base, Name: s.Name,
			AssignedAt: time.Unix(id.assigned[k], 0), LastSeenAt: time.Unix(id.seen[k], 0)}
	}
	// Stored assignments per server, for the cap.
	perServer := map[string]int{}
	for k := range id.names {
		perServer[k.Server]++
	}
	for i := range origs {
		if !res[i].Duplicate {
			present[catalognames.KeyOf(origs[i])] = true
		}
	}
	if persist {
		del = append(del, id.evictLocked(perServer, present, origs, res)...)
	}
	for i, o := range origs {
		a := res[i]
		if a.Duplicate {
			continue
		}
		k := catalognames.KeyOf(o)
		sc := scopes[i]
		if sc == "" {
			sc = globalScope
		}
		prev, had := id.names[k]
		if had && prev.Scope != sc && persist {
			// The server moved to another scope: the row moves with it.
			del = append(del, id.pairKey(k))
			if p, ok := id.pins[k]; ok {
				p.Scope = sc
				id.pins[k] = p
				movedPins = append(movedPins, p)
			}
		}
		switch {
		case (a.New || !had) && !persist:
			provisional[i] = true
			continue
		case (a.New || !had) && !had && perServer[k.Server] >= id.maxPerServer:
			// Over catalog.max_names_per_server with nothing retained left
			// to evict: served, not recorded.
			provisional[i] = true
			continue
		case a.New || !had:
			if !had {
				perServer[k.Server]++
			}
			id.names[k] = catalognames.Stored{Scope: sc, Base: catalognames.Base(o), Name: a.Name}
			id.assigned[k], id.seen[k] = unix, unix
		case prev.Scope != sc:
			prev.Scope = sc
			id.names[k] = prev
			id.seen[k] = unix
		case unix-id.seen[k] >= int64(touchEvery/time.Second) || id.dirty[k]:
			id.seen[k] = unix
		default:
			continue
		}
		upsert = append(upsert, row(k))
	}
	for k := range id.names {
		if persist && !present[k] && unix-id.seen[k] > int64(id.retention/time.Second) {
			del = append(del, id.pairKey(k))
			id.forgetLocked(k)
		}
	}
	if len(upsert)+len(del) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := id.store.ApplyNames(ctx, upsert, del)
		cancel()
		if err != nil {
			id.log.Warn("catalog: persisting tool names failed; they stay reserved in memory and are retried on the next change",
				"names", len(upsert), "err", err)
			for _, r := range upsert {
				id.dirty[catalognames.Key{Server: r.Server, Tool: r.Tool}] = true
			}
			id.stale = true
		} else {
			for _, r := range upsert {
				delete(id.dirty, catalognames.Key{Server: r.Server, Tool: r.Tool})
			}
			if len(movedPins) > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
				if err := id.store.PutPins(ctx, movedPins); err != nil {
					id.log.Warn("catalog: moving tool pins to their server's new scope failed", "pins", len(movedPins), "err", err)
				}
				cancel()
			}
		}
	}
	return res, provisional
}

// forgetLocked drops every in-memory trace of k.
func (id *identity) forgetLocked(k catalognames.Key) {
	delete(id.names, k)
	delete(id.seen, k)
	delete(id.assigned, k)
	delete(id.pins, k)
	delete(id.dirty, k)
}

// evictLocked enforces catalog.max_names_per_server before new names are
// recorded: for each server whose stored assignments plus the new ones of
// this rebuild exceed the cap, retained (absent) assignments are evicted,
// the least recently seen first, and logged. Present pairs are never
// evicted. It returns the store keys to delete and updates perServer.
func (id *identity) evictLocked(perServer map[string]int, present map[catalognames.Key]bool, origs []catalognames.Original, res []catalognames.Stable) []catalogstore.PairKey {
	want := map[string]int{}
	for i, o := range origs {
		if _, had := id.names[catalognames.KeyOf(o)]; !had && !res[i].Duplicate {
			want[o.Server]++
		}
	}
	var over []string
	for srv, n := range want {
		if perServer[srv]+n > id.maxPerServer {
			over = append(over, srv)
		}
	}
	for srv, n := range perServer {
		if n > id.maxPerServer && want[srv] == 0 {
			over = append(over, srv)
		}
	}
	var del []catalogstore.PairKey
	for _, srv := range over {
		var retained []catalognames.Key
		for k := range id.names {
			if k.Server == srv && !present[k] {
				retained = append(retained, k)
			}
		}
		slices.SortFunc(retained, func(a, b catalognames.Key) int {
			if c := cmp.Compare(id.seen[a], id.seen[b]); c != 0 {
				return c
			}
			return cmp.Compare(a.Tool, b.Tool)
		})
		excess := perServer[srv] + want[srv] - id.maxPerServer
		n := min(excess, len(retained))
		if n <= 0 {
			continue
		}
		for _, k := range retained[:n] {
			del = append(del, id.pairKey(k))
			id.forgetLocked(k)
		}
		perServer[srv] -= n
		if id.onEvict != nil {
			id.onEvict(srv, n)
		}
		id.log.Warn("catalog: retained tool names evicted: server over catalog.max_names_per_server",
			"server", srv, "evicted", n, "oldest", retained[0].Tool, "max", id.maxPerServer)
	}
	return del
}

// pinCheck is one tool of a pinned server to evaluate.
type pinCheck struct {
	key    catalognames.Key
	hash   string
	b      *base
	name   string
	review bool // pin_new_tools: review
	// provisional: the tool's name is not recorded yet (see assign); a
	// first sight is then not pinned (its definition hash covers the name).
	provisional bool
}

// states evaluates pinned tools: a tool seen for the first time is pinned
// as seen (allow) or recorded as waiting (review); the state of the others
// follows from their current hash (see migrations/003_tool_pins.sql).
func (id *identity) states(checks []pinCheck, now time.Time) []catalogv1.ToolState {
	id.mu.Lock()
	defer id.mu.Unlock()
	out := make([]catalogv1.ToolState, len(checks))
	var fresh []catalogstore.PinRow
	for i, c := range checks {
		p, ok := id.pins[c.key]
		if !ok && c.provisional {
			// Decided again once the name is recorded: a review server's
			// new tool waits meanwhile, an allow server's is served.
			out[i] = catalogv1.ToolState_TOOL_STATE_ACTIVE
			if c.review {
				out[i] = catalogv1.ToolState_TOOL_STATE_PENDING
			}
			continue
		}
		if !ok {
			p = catalogstore.PinRow{PairKey: id.pairKey(c.key), UpdatedAt: now}
			if !c.review {
				p.ApprovedDefinition, p.ApprovedHash = c.b.definition(c.name)
			}
			id.pins[c.key] = p
			fresh = append(fresh, p)
		}
		out[i] = pinState(p, c.hash)
	}
	if len(fresh) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := id.store.PutPins(ctx, fresh)
		cancel()
		if err != nil {
			// Not persisted: the next start sees these tools as new again
			// (pinned as then seen, or waiting for review).
			id.log.Warn("catalog: persisting tool pins failed", "pins", len(fresh), "err", err)
		}
	}
	return out
}

// pinState is the state of a tool whose current definition hash is h.
func pinState(p catalogstore.PinRow, h string) catalogv1.ToolState {
	switch {
	case p.ApprovedHash == h:
		return catalogv1.ToolState_TOOL_STATE_ACTIVE
	case p.RejectedHash == h:
		return catalogv1.ToolState_TOOL_STATE_REJECTED
	case p.ApprovedHash == "":
		return catalogv1.ToolState_TOOL_STATE_PENDING
	}
	return catalogv1.ToolState_TOOL_STATE_CHANGED
}

// pin returns the pin of k.
func (id *identity) pin(k catalognames.Key) (catalogstore.PinRow, bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	p, ok := id.pins[k]
	return p, ok
}

// nameOf returns the exposed name assigned to k ("" when none).
func (id *identity) nameOf(k catalognames.Key) string {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.names[k].Name
}

// setNames replaces the in-memory assignments with rows (every scope).
func (id *identity) setNames(rows []catalogstore.NameRow) {
	id.names = map[catalognames.Key]catalognames.Stored{}
	id.seen = map[catalognames.Key]int64{}
	id.assigned = map[catalognames.Key]int64{}
	id.dirty = map[catalognames.Key]bool{}
	for _, r := range rows {
		k := catalognames.Key{Server: r.Server, Tool: r.Tool}
		if _, dup := id.names[k]; dup && r.LastSeenAt.Unix() < id.seen[k] {
			continue // a stale row of a scope the pair left (its move was not written): the newer wins
		}
		id.names[k] = catalognames.Stored{Scope: r.Scope, Base: r.Base, Name: r.Name}
		id.seen[k], id.assigned[k] = r.LastSeenAt.Unix(), r.AssignedAt.Unix()
	}
	id.stale = false
}

// reloadNames re-reads the store's assignments (held under mu): those of
// another replica win; this process's unwritten ones are decided again. On
// a read error the memory is kept and the reload retried next time.
func (id *identity) reloadNames() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rows, err := id.store.LoadNames(ctx)
	if err != nil {
		id.log.Warn("catalog: re-reading tool names failed; keeping the names in memory", "err", err)
		return
	}
	id.setNames(rows)
}

// storeKey is the store key of k in its stored scope.
func (id *identity) storeKey(k catalognames.Key) catalogstore.PairKey {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.pairKey(k)
}
