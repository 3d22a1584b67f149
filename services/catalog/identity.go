package catalog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// globalScope is the visibility scope of servers every tenant sees
// (docs/decisions/0100); the only scope until servers can be tenant-scoped.
const globalScope = "*"

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

func pairKey(k catalognames.Key) catalogstore.PairKey {
	return catalogstore.PairKey{Scope: globalScope, Server: k.Server, Tool: k.Tool}
}

// load reads every name and pin of the global scope.
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
		if p.Scope == globalScope {
			id.pins[catalognames.Key{Server: p.Server, Tool: p.Tool}] = p
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
func (id *identity) assign(origs []catalognames.Original, now time.Time, persist bool) (res []catalognames.Stable, provisional []bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.stale {
		id.reloadNames()
	}
	res = catalognames.AssignStable(origs, id.names)
	provisional = make([]bool, len(origs))
	unix := now.Unix()
	present := make(map[catalognames.Key]bool, len(origs))
	var upsert []catalogstore.NameRow
	row := func(k catalognames.Key) catalogstore.NameRow {
		s := id.names[k]
		return catalogstore.NameRow{PairKey: pairKey(k), Base: s.Base, Name: s.Name,
			AssignedAt: time.Unix(id.assigned[k], 0), LastSeenAt: time.Unix(id.seen[k], 0)}
	}
	for i, o := range origs {
		a := res[i]
		if a.Duplicate {
			continue
		}
		k := catalognames.KeyOf(o)
		present[k] = true
		_, had := id.names[k]
		switch {
		case (a.New || !had) && !persist:
			provisional[i] = true
			continue
		case a.New || !had:
			id.names[k] = catalognames.Stored{Base: catalognames.Base(o), Name: a.Name}
			id.assigned[k], id.seen[k] = unix, unix
		case unix-id.seen[k] >= int64(touchEvery/time.Second) || id.dirty[k]:
			id.seen[k] = unix
		default:
			continue
		}
		upsert = append(upsert, row(k))
	}
	var del []catalogstore.PairKey
	for k := range id.names {
		if persist && !present[k] && unix-id.seen[k] > int64(id.retention/time.Second) {
			del = append(del, pairKey(k))
			delete(id.names, k)
			delete(id.seen, k)
			delete(id.assigned, k)
			delete(id.pins, k)
			delete(id.dirty, k)
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
		}
	}
	return res, provisional
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
			p = catalogstore.PinRow{PairKey: pairKey(c.key), UpdatedAt: now}
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

// setNames replaces the in-memory assignments with rows (global scope).
func (id *identity) setNames(rows []catalogstore.NameRow) {
	id.names = map[catalognames.Key]catalognames.Stored{}
	id.seen = map[catalognames.Key]int64{}
	id.assigned = map[catalognames.Key]int64{}
	id.dirty = map[catalognames.Key]bool{}
	for _, r := range rows {
		if r.Scope == globalScope {
			k := catalognames.Key{Server: r.Server, Tool: r.Tool}
			id.names[k] = catalognames.Stored{Base: r.Base, Name: r.Name}
			id.seen[k], id.assigned[k] = r.LastSeenAt.Unix(), r.AssignedAt.Unix()
		}
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
