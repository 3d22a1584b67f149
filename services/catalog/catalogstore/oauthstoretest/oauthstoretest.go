// Package oauthstoretest is the conformance suite of the catalog's OAuth
// stores (tokens, registered clients and pending logins of upstream MCP
// servers, docs/architecture.md §10.6): catalogstore's sqlite store and
// catalogpg's PostgreSQL store both pass it.
package oauthstoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// Store is what the catalog needs of an OAuth store.
type Store interface {
	// For returns one connection's catalogoauth.Store.
	For(server, tenant, subject string) catalogoauth.Store
	// LoginOwner returns the connection a pending login belongs to.
	LoginOwner(ctx context.Context, state string) (server, tenant, subject string, ok bool, err error)
	// Reseal re-seals every row under the keyring's current key.
	Reseal(ctx context.Context) (int, error)
}

// Open returns a store on the test's database sealing with keys; two calls
// give two stores (replicas) on the same database.
type Open func(keys *catalogstore.Keyring) Store

func keyring(t *testing.T, hexKeys ...string) *catalogstore.Keyring {
	t.Helper()
	k, err := catalogstore.ParseKeyring(strings.Join(hexKeys, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	k1 = strings.Repeat("a1", 32)
	k2 = strings.Repeat("b2", 32)
)

// Run runs the suite; newDB returns the Open of a fresh database.
func Run(t *testing.T, newDB func(t *testing.T) Open) {
	ctx := context.Background()

	t.Run("tokens", func(t *testing.T) {
		o := newDB(t)(keyring(t, k1))
		alice, bob := o.For("tracker", "t1", "alice"), o.For("tracker", "t1", "bob")
		if _, err := alice.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
			t.Fatalf("empty: %v", err)
		}
		exp := time.Now().Add(time.Hour).Truncate(time.Second)
		tok := &transport.Token{AccessToken: "AT-1", RefreshToken: "RT-1", TokenType: "Bearer", Scope: "tools", ExpiresAt: exp}
		if err := alice.SaveToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		got, err := alice.GetToken(ctx)
		if err != nil || got.AccessToken != "AT-1" || got.RefreshToken != "RT-1" || got.Scope != "tools" || !got.ExpiresAt.Equal(exp) {
			t.Fatalf("round trip: %+v %v", got, err)
		}
		if _, err := bob.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
			t.Fatalf("bob sees alice's token: %v", err)
		}
		for _, other := range []catalogoauth.Store{o.For("docs", "t1", "alice"), o.For("tracker", "t2", "alice"), o.For("tracker", "", "")} {
			if _, err := other.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
				t.Fatalf("another connection sees alice's token: %v", err)
			}
		}
		if err := alice.SaveToken(ctx, &transport.Token{AccessToken: "AT-2"}); err != nil {
			t.Fatal(err)
		}
		if got, err := alice.GetToken(ctx); err != nil || got.AccessToken != "AT-2" || !got.ExpiresAt.IsZero() {
			t.Fatalf("replace: %+v %v", got, err)
		}
		if err := alice.DeleteToken(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
			t.Fatalf("after delete: %v", err)
		}
		if err := bob.DeleteToken(ctx); err != nil {
			t.Fatalf("deleting nothing: %v", err)
		}
	})

	t.Run("clients", func(t *testing.T) {
		o := newDB(t)(keyring(t, k1))
		a := o.For("tracker", "t1", "alice")
		if _, err := a.GetClient(ctx, "https://as.example"); !errors.Is(err, catalogoauth.ErrNoClient) {
			t.Fatalf("empty: %v", err)
		}
		reg := &catalogoauth.Registration{ClientID: "cid", ClientSecret: "CS-1", AuthMethod: "client_secret_basic", RedirectURI: "https://tp/oauth/callback"}
		if err := a.SaveClient(ctx, "https://as.example", reg); err != nil {
			t.Fatal(err)
		}
		// Clients are per server, shared by its connections.
		if r, err := o.For("tracker", "t9", "zed").GetClient(ctx, "https://as.example"); err != nil || *r != *reg {
			t.Fatalf("another connection of the server: %+v %v", r, err)
		}
		if _, err := o.For("docs", "t1", "alice").GetClient(ctx, "https://as.example"); !errors.Is(err, catalogoauth.ErrNoClient) {
			t.Fatalf("another server: %v", err)
		}
		if _, err := a.GetClient(ctx, "https://other.example"); !errors.Is(err, catalogoauth.ErrNoClient) {
			t.Fatalf("another issuer: %v", err)
		}
	})

	t.Run("pending", func(t *testing.T) {
		open := newDB(t)
		o, replica := open(keyring(t, k1)), open(keyring(t, k1))
		a := o.For("tracker", "t1", "alice")
		p := &catalogoauth.PendingLogin{Verifier: "V-1", Redirect: "https://tp/oauth/callback", Resource: "https://mcp/mcp", ResourceMetadata: "https://mcp/.well-known/x",
			Reg: catalogoauth.Registration{ClientID: "cid"}, Scopes: []string{"tools", "offline_access"}, Expires: time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)}
		if err := pending(a).SavePending(ctx, "state-1", p); err != nil {
			t.Fatal(err)
		}
		if err := pending(a).SavePending(ctx, "state-old", &catalogoauth.PendingLogin{Verifier: "V-0", Expires: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
		// The other replica finds the owner.
		if s, tn, sub, ok, err := replica.LoginOwner(ctx, "state-1"); err != nil || !ok || s != "tracker" || tn != "t1" || sub != "alice" {
			t.Fatalf("owner from the replica: %q %q %q %v %v", s, tn, sub, ok, err)
		}
		for _, st := range []string{"state-old", "nope", "", strings.Repeat("x", catalogoauth.MaxStateBytes+1)} {
			if _, _, _, ok, err := replica.LoginOwner(ctx, st); ok || err != nil {
				t.Fatalf("owner of %q: %v %v", st, ok, err)
			}
		}
		// Only the owner takes it, once.
		if got, err := pending(replica.For("tracker", "t1", "bob")).TakePending(ctx, "state-1"); got != nil || err != nil {
			t.Fatalf("bob takes alice's login: %+v %v", got, err)
		}
		if got, err := pending(replica.For("docs", "t1", "alice")).TakePending(ctx, "state-1"); got != nil || err != nil {
			t.Fatalf("another server takes the login: %+v %v", got, err)
		}
		got, err := pending(replica.For("tracker", "t1", "alice")).TakePending(ctx, "state-1")
		if err != nil || got == nil || got.Verifier != "V-1" || got.ResourceMetadata != p.ResourceMetadata || got.Reg.ClientID != "cid" ||
			len(got.Scopes) != 2 || !got.Expires.Equal(p.Expires) {
			t.Fatalf("take: %+v %v", got, err)
		}
		if got, err := pending(a).TakePending(ctx, "state-1"); got != nil || err != nil {
			t.Fatalf("taken twice: %+v %v", got, err)
		}
		// Two replicas racing for one state: exactly one gets it.
		if err := pending(a).SavePending(ctx, "state-2", p); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for _, st := range []Store{o, replica, o, replica} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := pending(st.For("tracker", "t1", "alice")).TakePending(ctx, "state-2"); err != nil {
					t.Error(err)
				} else if got != nil {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d replicas took one login", wins.Load())
		}
		// At most MaxPendingLogins per connection: the oldest are dropped,
		// other connections' are kept.
		if err := pending(o.For("tracker", "t1", "bob")).SavePending(ctx, "bob-1", p); err != nil {
			t.Fatal(err)
		}
		for i := range catalogoauth.MaxPendingLogins + 3 {
			q := *p
			q.Expires = p.Expires.Add(time.Duration(i) * time.Second)
			if err := pending(a).SavePending(ctx, fmt.Sprintf("flood-%02d", i), &q); err != nil {
				t.Fatal(err)
			}
		}
		kept := 0
		for i := range catalogoauth.MaxPendingLogins + 3 {
			if _, _, _, ok, _ := o.LoginOwner(ctx, fmt.Sprintf("flood-%02d", i)); ok {
				kept++
				if i < 3 {
					t.Errorf("flood-%02d (among the oldest) kept", i)
				}
			}
		}
		if kept != catalogoauth.MaxPendingLogins {
			t.Fatalf("%d pending logins kept for one connection, want %d", kept, catalogoauth.MaxPendingLogins)
		}
		if _, _, _, ok, _ := o.LoginOwner(ctx, "bob-1"); !ok {
			t.Fatal("another connection's pending login was dropped")
		}
	})

	t.Run("sealed", func(t *testing.T) {
		open := newDB(t)
		o := open(keyring(t, k1))
		if err := o.For("tracker", "t1", "alice").SaveToken(ctx, &transport.Token{AccessToken: "AT-sealed-secret", RefreshToken: "RT-sealed-secret"}); err != nil {
			t.Fatal(err)
		}
		if err := o.For("tracker", "t1", "alice").SaveClient(ctx, "https://as", &catalogoauth.Registration{ClientID: "c", ClientSecret: "CS-sealed-secret"}); err != nil {
			t.Fatal(err)
		}
		// Another key fails closed, naming no secret.
		_, err := open(keyring(t, k2)).For("tracker", "t1", "alice").GetToken(ctx)
		if err == nil || errors.Is(err, transport.ErrNoToken) || strings.Contains(err.Error(), "sealed-secret") {
			t.Fatalf("wrong key: %v", err)
		}
		// Rotation: k2 first re-seals both rows; then k2 alone opens them.
		n, err := open(keyring(t, k2, k1)).Reseal(ctx)
		if err != nil || n != 2 {
			t.Fatalf("reseal: %d %v", n, err)
		}
		if n, err := open(keyring(t, k2, k1)).Reseal(ctx); err != nil || n != 0 {
			t.Fatalf("second reseal: %d %v", n, err)
		}
		only2 := open(keyring(t, k2))
		if tok, err := only2.For("tracker", "t1", "alice").GetToken(ctx); err != nil || tok.AccessToken != "AT-sealed-secret" {
			t.Fatalf("after rotation: %+v %v", tok, err)
		}
		if r, err := only2.For("tracker", "t1", "alice").GetClient(ctx, "https://as"); err != nil || r.ClientSecret != "CS-sealed-secret" {
			t.Fatalf("client after rotation: %+v %v", r, err)
		}
		if _, err := open(keyring(t, k1)).Reseal(ctx); err == nil {
			t.Fatal("reseal with a keyring that lacks the rows' key succeeded")
		}
	})

	t.Run("lock", func(t *testing.T) {
		open := newDB(t)
		a, b := open(keyring(t, k1)).For("tracker", "t1", "alice"), open(keyring(t, k1)).For("tracker", "t1", "alice")
		la, ok := a.(catalogoauth.Locker)
		if !ok {
			t.Skip("the store serves one process: the Client's mutex serialises renewals")
		}
		lb := b.(catalogoauth.Locker)
		var inside, overlaps atomic.Int32
		var wg sync.WaitGroup
		for i := range 6 {
			l := la
			if i%2 == 1 {
				l = lb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := l.LockToken(ctx, func(ctx context.Context) error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(20 * time.Millisecond)
					inside.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if overlaps.Load() != 0 {
			t.Fatalf("%d overlapping holders of one connection's lock", overlaps.Load())
		}
		// Other connections are not blocked by it, and fn's error comes back.
		other := open(keyring(t, k1)).For("tracker", "t1", "bob").(catalogoauth.Locker)
		boom := errors.New("boom")
		done := make(chan error, 1)
		_ = la.LockToken(ctx, func(ctx context.Context) error {
			go func() { done <- other.LockToken(ctx, func(context.Context) error { return boom }) }()
			select {
			case err := <-done:
				if !errors.Is(err, boom) {
					t.Errorf("fn's error: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("another connection's lock waited for this one")
			}
			return nil
		})
		// Statements inside the lock see the store (no second connection needed).
		if err := la.LockToken(ctx, func(ctx context.Context) error {
			if err := a.SaveToken(ctx, &transport.Token{AccessToken: "AT-in-lock"}); err != nil {
				return err
			}
			_, err := a.GetToken(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if tok, err := b.GetToken(ctx); err != nil || tok.AccessToken != "AT-in-lock" {
			t.Fatalf("written inside the lock, read by the replica: %+v %v", tok, err)
		}
	})
}

func pending(s catalogoauth.Store) catalogoauth.PendingStore { return s.(catalogoauth.PendingStore) }
