package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/hashring"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
)

// Placement of `stateful: true` servers over several catalog replicas on
// one PostgreSQL database (docs/decisions/0086-session-placement.md):
//
//   - every replica with catalog.placement.advertise_address heartbeats a
//     row of catalog.replicas; the members are the rows younger than
//     catalog.placement.member_timeout;
//   - a stateful server's owner is hashring.Owner(grpcx.StatefulKey(server),
//     members) — the
//     runtime's balancer computes the same owner over its address list;
//   - the owner runs the server only while it holds the session advisory
//     lock catalog.stateful.<server> (on one dedicated connection), so two
//     replicas never run it at once, even while their views of the members
//     differ; a replica giving a server up stops it before unlocking;
//   - the owner publishes the server's tools in catalog.stateful_tools;
//     the other replicas list them and refuse the server's calls with
//     UNAVAILABLE naming the owner.
//
// On sqlite, or without an advertise address, there is no placer and every
// server runs in the process.
type placer struct {
	st       *catalogpg.Store
	mgr      func() *catalogmcp.Manager
	log      *slog.Logger
	self     string
	instance string
	hb, ttl  time.Duration

	mu        sync.Mutex
	live      []string
	locks     *catalogpg.Locks
	owned     map[string]bool // locks held (servers that may run here)
	release   map[string]bool // owned servers given up, unlocked after they stopped
	published map[string]catalogpg.PublishedTools
	decoded   map[string]decodedTools
	pubbed    map[string][2]uint64 // server → (Instance, ToolsVersion) published
	conflict  string
	halt      chan struct{} // closed: stop heartbeating (tests simulate a crash)
}

type decodedTools struct {
	version int64
	tools   []catalogmcp.ToolDef
}

// lockName is the advisory lock of a stateful server.
func lockName(server string) string { return "catalog.stateful." + server }

// newPlacer joins the membership (one heartbeat, so the first Apply
// already places servers) and returns the placer; nil when placement is
// off (sqlite or no advertise address).
func (s *Server) newPlacer(ctx context.Context) (*placer, error) {
	st, ok := s.store.(*catalogpg.Store)
	if !ok || s.cfg.Placement.AdvertiseAddress == "" {
		if ok {
			s.log.Info("catalog: no catalog.placement.advertise_address: stateful servers run on this replica (run one catalog replica, or set it on every replica)")
		}
		return nil, nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := &placer{st: st, mgr: func() *catalogmcp.Manager { return s.mgr }, log: s.log, self: s.cfg.Placement.AdvertiseAddress,
		instance: hex.EncodeToString(b[:]), hb: s.cfg.Placement.Heartbeat, ttl: s.cfg.Placement.MemberTimeout,
		owned: map[string]bool{}, release: map[string]bool{}, published: map[string]catalogpg.PublishedTools{},
		decoded: map[string]decodedTools{}, pubbed: map[string][2]uint64{}, halt: make(chan struct{})}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	locks, err := st.NewLocks(hctx)
	if err != nil {
		return nil, fmt.Errorf("catalog.placement: %w", err)
	}
	p.locks = locks
	if err := p.heartbeat(hctx); err != nil {
		locks.Close()
		return nil, fmt.Errorf("catalog.placement: %w", err)
	}
	return p, nil
}

// heartbeat refreshes the membership and the published tools.
func (p *placer) heartbeat(ctx context.Context) error {
	live, conflict, err := p.st.Heartbeat(ctx, p.self, p.instance, p.ttl)
	if err != nil {
		return err
	}
	pub, err := p.st.StatefulTools(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.live, p.published = live, pub
	if conflict != "" && conflict != p.conflict {
		p.log.Error("catalog: another live catalog replica uses the same catalog.placement.advertise_address; stateful placement is wrong until one of them changes it",
			"advertise_address", p.self)
	}
	p.conflict = conflict
	p.mu.Unlock()
	return nil
}

// placement is catalogmcp.ManagerOptions.Placement: local when this
// replica owns the server and holds its lock, else remote with the owner
// and the published tools.
func (p *placer) placement(server string) catalogmcp.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	owner := hashring.Owner(grpcx.StatefulKey(server), p.live)
	if owner == p.self && !p.release[server] {
		if !p.owned[server] && p.locks != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ok, err := p.locks.TryLock(ctx, lockName(server))
			cancel()
			switch {
			case err != nil:
				p.log.Warn("catalog: stateful server lock failed", "server", server, "err", err)
			case ok:
				p.owned[server] = true
				p.log.Info("catalog: stateful MCP server placed on this replica", "server", server, "replica", p.self, "members", len(p.live))
			}
		}
		if p.owned[server] {
			return catalogmcp.Placement{}
		}
		owner = "" // the previous owner still holds it: taking over
	} else if p.owned[server] {
		p.release[server] = true // stopped by this Apply, unlocked by the next tick
	}
	out := catalogmcp.Placement{Remote: true, Owner: owner}
	if pub, ok := p.published[server]; ok {
		d, ok := p.decoded[server]
		if !ok || d.version != pub.Version {
			d = decodedTools{version: pub.Version}
			if err := json.Unmarshal(pub.Tools, &d.tools); err != nil {
				p.log.Warn("catalog: published tools of a stateful server are unreadable", "server", server, "err", err)
			}
			p.decoded[server] = d
		}
		out.Tools, out.Listed = d.tools, true
		out.Version = fmt.Sprint(pub.Version)
	}
	out.Version = owner + "/" + out.Version
	return out
}

// run heartbeats until stop is closed.
func (p *placer) run(stop <-chan struct{}) {
	t := time.NewTicker(p.hb)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-p.halt:
			return
		case <-t.C:
			p.tick()
		}
	}
}

// tick is one heartbeat: refresh the membership, check the lock session,
// re-place every server (Reapply starts what this replica now owns, stops
// what it gave up), unlock what was given up, publish local tools.
func (p *placer) tick() {
	ctx, cancel := context.WithTimeout(context.Background(), p.hb+5*time.Second)
	defer cancel()
	if err := p.heartbeat(ctx); err != nil {
		p.log.Warn("catalog: placement heartbeat failed", "err", err)
	}
	p.mu.Lock()
	if p.locks != nil && p.locks.Ping(ctx) != nil {
		// The lock session is gone, and its locks with it: whatever runs
		// here must stop; a new session re-acquires them.
		p.log.Warn("catalog: the placement lock session ended; stopping local stateful servers")
		p.locks.Close()
		p.locks = nil
		p.owned, p.release = map[string]bool{}, map[string]bool{}
	}
	if p.locks == nil {
		if l, err := p.st.NewLocks(ctx); err == nil {
			p.locks = l
		}
	}
	p.mu.Unlock()
	mgr := p.mgr()
	// Waits for stateful servers that stopped here; then, before another
	// Apply places anything, releases the locks of servers given up or
	// no longer configured (stopped by an Apply in between).
	mgr.Reapply(func(stateful map[string]bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for server := range p.owned {
			if !stateful[server] {
				p.release[server] = true
			}
		}
		p.unlockReleased(ctx)
	})
	for _, st := range mgr.LocalStateful() {
		v := [2]uint64{st.Instance, st.ToolsVersion}
		p.mu.Lock()
		done := p.pubbed[st.Name] == v
		p.mu.Unlock()
		if !st.Listed || done {
			continue
		}
		b, err := json.Marshal(slices.Clone(st.Tools))
		if err == nil {
			err = p.st.PublishTools(ctx, st.Name, p.self, b)
		}
		if err != nil {
			p.log.Warn("catalog: publishing the tools of a stateful server failed", "server", st.Name, "err", err)
			continue
		}
		p.mu.Lock()
		p.pubbed[st.Name] = v
		p.mu.Unlock()
	}
}

// unlockReleased releases the locks of the servers given up (p.mu held;
// they have stopped).
func (p *placer) unlockReleased(ctx context.Context) {
	for server := range p.release {
		if p.locks != nil {
			if err := p.locks.Unlock(ctx, lockName(server)); err != nil {
				p.log.Warn("catalog: stateful server unlock failed", "server", server, "err", err)
			}
		}
		delete(p.owned, server)
		delete(p.release, server)
		p.log.Info("catalog: stateful MCP server released by this replica", "server", server)
	}
}

// close leaves the membership (the others take over at their next tick)
// and ends the lock session. Call it after the manager stopped every
// server.
func (p *placer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.st.Leave(ctx, p.self, p.instance)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.locks != nil {
		p.locks.Close()
		p.locks = nil
	}
}

// placement is the manager's Placement option (nil when placement is off).
func (s *Server) placement() func(string) catalogmcp.Placement {
	if s.place == nil {
		return nil
	}
	return s.place.placement
}

// startPlacement starts the heartbeat loop.
func (s *Server) startPlacement() {
	if s.place == nil {
		return
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.place.run(s.stop) }()
}

// closePlacement leaves the membership and releases the locks.
func (s *Server) closePlacement() {
	if s.place != nil {
		s.place.close()
	}
}
