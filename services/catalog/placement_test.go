package catalog

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/hashring"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
)

// placedCall calls tool as user through client under placement key key and
// returns the text, the replica the balancer picked and whether the
// catalog said it created the session.
func placedCall(t *testing.T, c catalogv1.CatalogServiceClient, key, user, tool string) (text, replica string, created bool, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx, pl := grpcx.WithPlacementKey(actingFor(ctx, user), key)
	var tr metadata.MD
	r, err := c.CallTool(ctx, &catalogv1.CallToolRequest{Name: tool, Arguments: args(t, `{}`)}, grpc.Trailer(&tr))
	if err != nil {
		return "", pl.Addr(), false, err
	}
	return textOf(r), pl.Addr(), slicesContains(tr.Get(grpcx.SessionHeader), grpcx.SessionCreated), nil
}

func slicesContains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// listenLoopback returns a listener on a free loopback port.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// TestScopedSessionsPlacedByKey: two catalog replicas behind one address
// list and the placement balancer. Every call of one per_user key lands on
// the replica owning the key (one child per user, on that replica only);
// 12 users spread over both; when a user's replica stops, the next call
// of that user succeeds on the other replica, which says it created the
// session, and later calls stay there without a new session.
func TestScopedSessionsPlacedByKey(t *testing.T) {
	ext := extJSON(fixtureServer("fx", `"session_scope": "per_user"`))
	a, b := start(t, ext, nil), start(t, ext, nil)
	byAddr := map[string]*harness{a.addr: a, b.addr: b}
	addrs := []string{a.addr, b.addr}
	cc, err := grpcx.Dial(a.addr+","+b.addr, grpcx.DialOptions{Token: tokSvc, MaxMessageBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := catalogv1.NewCatalogServiceClient(cc)
	key := func(user string) string { return "per_user\x00fx\x00default\x00" + user }

	pidOf := map[string]string{}
	owners := map[string]int{}
	for i := 0; i < 12; i++ {
		user := fmt.Sprintf("user%d", i)
		for n := 0; n < 3; n++ {
			pid, replica, created, err := placedCall(t, client, key(user), user, "fx_pid")
			if err != nil {
				t.Fatalf("%s call %d: %v", user, n, err)
			}
			if want := hashring.Owner(key(user), addrs); replica != want {
				t.Fatalf("%s call %d went to %s, want its owner %s", user, n, replica, want)
			}
			if created != (n == 0) {
				t.Fatalf("%s call %d: session created = %v, want %v", user, n, created, n == 0)
			}
			if n > 0 && pid != pidOf[user] {
				t.Fatalf("%s call %d ran in child %s, the first in %s: the session moved", user, n, pid, pidOf[user])
			}
			pidOf[user] = pid
			owners[replica]++
		}
	}
	if owners[a.addr] == 0 || owners[b.addr] == 0 {
		t.Fatalf("12 users all on one replica: %v", owners)
	}
	// One per-user session per user, each on its owner only.
	for addr, h := range byAddr {
		n := 0
		for _, k := range h.srv.Manager().Pool().Keys() {
			if hashring.Owner(key(k.Subject), addrs) != addr {
				t.Fatalf("replica %s holds a session of %s, owned by the other replica", addr, k.Subject)
			}
			n++
		}
		if n != owners[addr]/3 {
			t.Fatalf("replica %s holds %d sessions, want %d", addr, n, owners[addr]/3)
		}
	}

	// Stop the owner of user0: its next call re-creates the session on the other.
	user := "user0"
	victim := byAddr[hashring.Owner(key(user), addrs)]
	other := a
	if victim == a {
		other = b
	}
	victim.gs.Stop()
	victim.close()
	var pid, replica string
	var created bool
	eventually(t, 10*time.Second, "a call of "+user+" after its replica stopped", func() bool {
		pid, replica, created, err = placedCall(t, client, key(user), user, "fx_pid")
		return err == nil
	})
	if replica != other.addr || !created || pid == pidOf[user] {
		t.Fatalf("after the stop: replica %s (want %s), created %v (want true), pid %s (old %s)", replica, other.addr, created, pid, pidOf[user])
	}
	if _, replica2, created2, err := placedCall(t, client, key(user), user, "fx_pid"); err != nil || replica2 != other.addr || created2 {
		t.Fatalf("the call after: replica %s, created %v, %v; want %s, false", replica2, created2, err, other.addr)
	}
}

// statefulReplica starts a catalog on PostgreSQL advertising its own
// loopback address, with a short heartbeat.
func statefulReplica(t *testing.T, dsn, ext string) *harness {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	lis := listenLoopback(t)
	return startOn(t, lis, t.TempDir(), ext, func(c *Config, env *svckit.Env) {
		env.Postgres = pool
		c.Placement = PlacementConfig{AdvertiseAddress: lis.Addr().String(), Heartbeat: 100 * time.Millisecond, MemberTimeout: 600 * time.Millisecond}
	})
}

// localPid is the pid of h's child of the stateful server st (0 = none).
func localPid(h *harness) int {
	for _, st := range h.srv.Manager().LocalStateful() {
		if st.Name == "st" {
			return st.Pid
		}
	}
	return 0
}

// TestStatefulServerOnOneReplica: a `stateful: true` server on two catalog
// replicas over one PostgreSQL database runs on exactly one of them, the
// owner of its key by rendezvous hashing; both list its tools; calls
// through the balancer reach it; a direct call on the other replica is
// refused with UNAVAILABLE naming the owner; when the owner stops (clean
// stop, then a crash without leaving), the other replica takes over within
// the member timeout and the calls succeed there.
func TestStatefulServerOnOneReplica(t *testing.T) {
	dsn := pgtest.DSN(t)
	ext := extJSON(fixtureServer("st", `"stateful": true`), fixtureServer("shared", ""))
	a, b := statefulReplica(t, dsn, ext), statefulReplica(t, dsn, ext)
	addrs := []string{a.addr, b.addr}
	byAddr := map[string]*harness{a.addr: a, b.addr: b}
	key := grpcx.StatefulKey("st")
	// b's first heartbeat made it a member; a learns of b at its next
	// tick and hands the server over if b owns it.
	owner := byAddr[hashring.Owner(key, addrs)]
	other := a
	if owner == a {
		other = b
	}
	eventually(t, 15*time.Second, "st running on its owner only", func() bool {
		return localPid(owner) > 0 && localPid(other) == 0 && len(other.srv.Manager().LocalStateful()) == 0
	})
	ownerPid := localPid(owner)
	// Both list the tools, READY; the shared server runs on both.
	for _, h := range []*harness{a, b} {
		eventually(t, 10*time.Second, "st_pid listed on "+h.addr, func() bool {
			r, err := h.svc.GetTool(ctxT(t), &catalogv1.GetToolRequest{Name: "st_pid"})
			return err == nil && r.GetTool().GetAvailable() && r.GetTool().GetStateful()
		})
		if pid := h.srv.Manager().Statuses()[1].Pid; pid <= 0 || !alive(pid) {
			t.Fatalf("shared server not running on %s", h.addr)
		}
	}
	cc, err := grpcx.Dial(a.addr+","+b.addr, grpcx.DialOptions{Token: tokSvc, MaxMessageBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := catalogv1.NewCatalogServiceClient(cc)
	for i := 0; i < 6; i++ {
		pid, replica, _, err := placedCall(t, client, key, fmt.Sprintf("u%d", i), "st_pid")
		if err != nil || replica != owner.addr || pid != strconv.Itoa(ownerPid) {
			t.Fatalf("call %d: pid %s on %s, %v; want pid %d on %s", i, pid, replica, err, ownerPid, owner.addr)
		}
	}
	_, err = other.call(ctxT(t), other.svc, "st_pid", `{}`)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), owner.addr) {
		t.Fatalf("direct call on the non-owner: %v; want UNAVAILABLE naming %s", err, owner.addr)
	}
	var ei *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if x, ok := d.(*errdetails.ErrorInfo); ok {
			ei = x
		}
	}
	if ei.GetReason() != catalogv1.ErrorReason_ERROR_REASON_SERVER_UNAVAILABLE.String() || ei.GetMetadata()["owner"] != owner.addr {
		t.Fatalf("error details %v", ei)
	}

	// Clean stop of the owner: the other takes over at its next heartbeat.
	stopped := time.Now()
	owner.gs.Stop()
	owner.close()
	if alive(ownerPid) {
		t.Fatalf("the stopped owner's child %d is alive", ownerPid)
	}
	eventually(t, 15*time.Second, "takeover after a clean stop", func() bool { return localPid(other) > 0 })
	t.Logf("takeover after a clean stop: %s", time.Since(stopped).Round(time.Millisecond))
	eventually(t, 10*time.Second, "a call after the takeover", func() bool {
		pid, replica, _, err := placedCall(t, client, key, "u0", "st_pid")
		return err == nil && replica == other.addr && pid == strconv.Itoa(localPid(other))
	})

	// A third replica joins; if it owns the server it takes it from the
	// second, which stops it first; at no time do two children run.
	c := statefulReplica(t, dsn, ext)
	left := []string{other.addr, c.addr}
	newOwner, newOther := other, c
	if hashring.Owner(key, left) == c.addr {
		newOwner, newOther = c, other
	}
	deadline := time.Now().Add(15 * time.Second)
	for !(localPid(newOwner) > 0 && localPid(newOther) == 0) {
		if localPid(newOwner) > 0 && localPid(newOther) > 0 {
			t.Fatal("two replicas run the stateful server at once")
		}
		if time.Now().After(deadline) {
			t.Fatalf("st not on %s only within 15 s (pids %d, %d)", newOwner.addr, localPid(newOwner), localPid(newOther))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A crash: the owner stops heartbeating without leaving and its lock
	// session ends (as when the process dies); the survivor takes over
	// after the member timeout.
	crashed := time.Now() // its last heartbeat is at most one heartbeat earlier
	newOwner.srv.place.crashForTest()
	eventually(t, 15*time.Second, "takeover after a crash", func() bool { return localPid(newOther) > 0 })
	took := time.Since(crashed)
	t.Logf("takeover after a crash (member_timeout 600ms, heartbeat 100ms): %s", took.Round(time.Millisecond))
	if took < 500*time.Millisecond {
		t.Fatalf("takeover after %s, before the member timeout could expire", took)
	}
}

// crashForTest makes the replica look dead to the others, as a killed
// process does: no more heartbeats, no Leave, and its lock session ends.
func (p *placer) crashForTest() {
	close(p.halt)
	time.Sleep(3 * p.hb) // a tick in progress ends
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.locks != nil {
		p.locks.Close()
		p.locks = nil
	}
	p.self = "crashed" // and it does not Leave under its address at Close
}

// catalog.placement: defaults, and each bad value named by its key.
func TestPlacementConfigValidate(t *testing.T) {
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil || c.Placement.Heartbeat != 2*time.Second || c.Placement.MemberTimeout != 10*time.Second || c.Placement.AdvertiseAddress != "" {
		t.Fatalf("defaults: %+v %v", c.Placement, err)
	}
	for _, tc := range []struct {
		p    PlacementConfig
		want string
	}{
		{PlacementConfig{AdvertiseAddress: "catalog-0"}, "catalog.placement.advertise_address: "},
		{PlacementConfig{AdvertiseAddress: "dns:///catalog:7420"}, "catalog.placement.advertise_address: "},
		{PlacementConfig{AdvertiseAddress: ":7420"}, "catalog.placement.advertise_address: "},
		{PlacementConfig{Heartbeat: time.Millisecond}, "catalog.placement.heartbeat: "},
		{PlacementConfig{Heartbeat: time.Second, MemberTimeout: 2 * time.Second}, "catalog.placement.member_timeout: "},
	} {
		c := Config{Placement: tc.p}
		c.SetDefaults()
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %s...", tc.p, err, tc.want)
		}
	}
	c = Config{Placement: PlacementConfig{AdvertiseAddress: "10.1.2.3:7420"}}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A stateful server written through the API keeps the key, and GetTool
// reports the scope and stateful of a tool's server.
func TestStatefulThroughTheAPI(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", `"session_scope": "per_thread"`)), nil)
	ctx := ctxT(t)
	r, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "fx_pid"})
	if err != nil || r.GetTool().GetSessionScope() != catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD || r.GetTool().GetStateful() {
		t.Fatalf("GetTool: %v %v", r.GetTool(), err)
	}
	// Written through the API: kept, shown, and its tools marked stateful.
	if _, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "ev", Command: "node", Args: []string{npmJS(t, "server-everything")}, Stateful: true}}}); err != nil {
		t.Fatal(err)
	}
	g, err := h.admin.GetServer(ctx, &catalogv1.GetServerRequest{Name: "ev"})
	if err != nil || !g.GetServer().GetConfig().GetStateful() {
		t.Fatalf("GetServer after writing stateful: %v %v", g, err)
	}
	eventually(t, 30*time.Second, "ev_echo stateful", func() bool {
		r, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "ev_echo"})
		return err == nil && r.GetTool().GetStateful() && r.GetTool().GetSessionScope() == catalogv1.SessionScope_SESSION_SCOPE_SHARED
	})
	// On sqlite a stateful server runs here (no placement): calls work.
	if _, err := h.call(ctx, h.svc, "ev_echo", `{"message": "hi"}`); err != nil {
		t.Fatal(err)
	}
}
