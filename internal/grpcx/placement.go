package grpcx

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/internal/hashring"
)

// PlacementPolicy is the name of the load-balancing policy of every
// connection made by Dial (docs/decisions/0086-session-placement.md): a call
// whose context carries a placement key (WithPlacementKey) goes to the
// replica that owns the key by rendezvous hashing (internal/hashring) over
// the addresses the target resolves to; when the owner is unavailable, to
// the next-ranked replica that is READY. A call without a key is balanced
// round-robin over the READY replicas, as gRPC's round_robin does.
const PlacementPolicy = "toolplane_placement"

// SessionHeader is the response trailer by which the catalog says that a
// call started the MCP session it ran in (value SessionCreated): the
// scope's first call on that replica, or its previous session had ended.
const SessionHeader = "toolplane-session"

// SessionCreated is the value of SessionHeader.
const SessionCreated = "created"

func init() { balancer.Register(placementBuilder{}) }

// StatefulKey is the placement key of a `stateful: true` MCP server: the
// runtime places its calls by it, and the catalog replicas choose the one
// that runs it by it (hashring.Owner over their advertised addresses).
func StatefulKey(server string) string { return "stateful\x00" + server }

// Placement is what the balancer did with one keyed call: the replica it
// picked and the one that owns the key. It is filled in by the picker;
// read it after the call returned.
type Placement struct {
	// Key is the placement key of the call.
	Key string

	mu    sync.Mutex
	addr  string
	owner string
}

// Addr is the address of the replica the call was sent to ("" when no
// replica was picked, e.g. the call failed before).
func (p *Placement) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Owner is the address of the replica that owns the key among every
// address the target resolved to (READY or not).
func (p *Placement) Owner() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owner
}

func (p *Placement) record(addr, owner string) {
	p.mu.Lock()
	p.addr, p.owner = addr, owner
	p.mu.Unlock()
}

type placementKey struct{}

// WithPlacementKey returns ctx whose calls are placed on the replica owning
// key (an empty key leaves ctx as it is), and the record the picker fills in.
func WithPlacementKey(ctx context.Context, key string) (context.Context, *Placement) {
	p := &Placement{Key: key}
	if key == "" {
		return ctx, p
	}
	return context.WithValue(ctx, placementKey{}, p), p
}

func placementOf(ctx context.Context) *Placement {
	p, _ := ctx.Value(placementKey{}).(*Placement)
	return p
}

type placementBuilder struct{}

func (placementBuilder) Name() string { return PlacementPolicy }

func (placementBuilder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &placementBalancer{cc: cc, subs: map[string]*subEntry{}}
}

// subEntry is one replica's subchannel and what is known of it.
type subEntry struct {
	addr  resolver.Address
	sc    balancer.SubConn
	state connectivity.State
	// down: the replica failed to connect, or lost its connection, since
	// it was last READY. A keyed call skips a down owner; it waits for an
	// owner that is still making its first connection.
	down bool
	err  error
}

// placementBalancer keeps one subchannel per resolved address.
type placementBalancer struct {
	cc balancer.ClientConn

	mu          sync.Mutex
	subs        map[string]*subEntry // by address
	resolverErr error
	closed      bool
}

func addressesOf(s resolver.State) []resolver.Address {
	if len(s.Endpoints) > 0 {
		out := make([]resolver.Address, 0, len(s.Endpoints))
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) > 0 {
				out = append(out, ep.Addresses[0])
			}
		}
		return out
	}
	return s.Addresses
}

func (b *placementBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.resolverErr = nil
	addrs := addressesOf(s.ResolverState)
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if seen[a.Addr] {
			continue
		}
		seen[a.Addr] = true
		if _, ok := b.subs[a.Addr]; ok {
			continue
		}
		e := &subEntry{addr: a, state: connectivity.Idle}
		sc, err := b.cc.NewSubConn([]resolver.Address{a}, balancer.NewSubConnOptions{
			// Honours the service config's healthCheckConfig (dial.go): a
			// replica not SERVING reports TRANSIENT_FAILURE and is skipped.
			HealthCheckEnabled: true,
			StateListener:      func(st balancer.SubConnState) { b.updateSub(e, st) },
		})
		if err != nil {
			continue
		}
		e.sc = sc
		b.subs[a.Addr] = e
		sc.Connect()
	}
	for addr, e := range b.subs {
		if !seen[addr] {
			e.sc.Shutdown()
			delete(b.subs, addr)
		}
	}
	if len(b.subs) == 0 {
		b.resolverErr = errors.New("the resolver returned no addresses")
		b.updateLocked()
		return balancer.ErrBadResolverState
	}
	b.updateLocked()
	return nil
}

func (b *placementBalancer) ResolverError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resolverErr = err
	if len(b.subs) == 0 {
		b.updateLocked()
	}
}

func (b *placementBalancer) updateSub(e *subEntry, st balancer.SubConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.subs[e.addr.Addr] != e {
		return
	}
	prev := e.state
	e.state = st.ConnectivityState
	switch st.ConnectivityState {
	case connectivity.Ready:
		e.down, e.err = false, nil
	case connectivity.TransientFailure:
		e.down, e.err = true, st.ConnectionError
		b.cc.ResolveNow(resolver.ResolveNowOptions{}) // a pod may have moved
	case connectivity.Idle:
		if prev == connectivity.Ready {
			e.down = true // the connection was lost
		}
		e.sc.Connect()
	case connectivity.Shutdown:
		return
	}
	b.updateLocked()
}

// updateLocked publishes the aggregate state and a new picker (a
// snapshot: the picker reads no balancer state).
func (b *placementBalancer) updateLocked() {
	p := &placementPicker{byAddr: make(map[string]pickEntry, len(b.subs))}
	anyReady, anyConnecting := false, false
	var lastErr error
	for addr, e := range b.subs {
		ready := e.state == connectivity.Ready
		p.all = append(p.all, addr)
		p.byAddr[addr] = pickEntry{sc: e.sc, ready: ready, down: e.down}
		switch {
		case ready:
			anyReady = true
			p.ready = append(p.ready, addr)
		case !e.down:
			anyConnecting = true
		}
		if e.err != nil {
			lastErr = e.err
		}
	}
	sort.Strings(p.all)
	sort.Strings(p.ready)
	state := connectivity.TransientFailure
	switch {
	case anyReady:
		state = connectivity.Ready
	case anyConnecting:
		state = connectivity.Connecting
	}
	if state == connectivity.TransientFailure {
		err := lastErr
		if err == nil {
			err = b.resolverErr
		}
		if err == nil {
			err = errors.New("no address")
		}
		p.err = status.Errorf(codes.Unavailable, "no replica is reachable: %v", err)
	}
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: p})
}

func (b *placementBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *placementBalancer) ExitIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.subs {
		if e.state == connectivity.Idle {
			e.sc.Connect()
		}
	}
}

func (b *placementBalancer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for addr, e := range b.subs {
		e.sc.Shutdown()
		delete(b.subs, addr)
	}
}

// pickEntry is one replica as the picker saw it.
type pickEntry struct {
	sc          balancer.SubConn
	ready, down bool
}

// placementPicker is immutable; the balancer replaces it on every change.
type placementPicker struct {
	all    []string // every address, sorted
	ready  []string // the READY ones, sorted
	byAddr map[string]pickEntry
	err    error // set when no replica is reachable
	next   atomic.Uint32
}

func (p *placementPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.err != nil {
		return balancer.PickResult{}, p.err
	}
	pl := placementOf(info.Ctx)
	if pl == nil {
		if len(p.ready) == 0 {
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
		addr := p.ready[int(p.next.Add(1)-1)%len(p.ready)]
		return balancer.PickResult{SubConn: p.byAddr[addr].sc}, nil
	}
	rank := hashring.Rank(pl.Key, p.all)
	for _, addr := range rank {
		e := p.byAddr[addr]
		switch {
		case e.ready:
			pl.record(addr, rank[0])
			return balancer.PickResult{SubConn: e.sc}, nil
		case !e.down:
			// Still making its first connection (start-up): wait for it
			// rather than place the key elsewhere and move it back.
			return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
		}
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}
