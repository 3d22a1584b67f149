package catalogpg

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/oauthstoretest"
)

// newPool opens a pool of its own on dsn (one per replica).
func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestOAuthStoreConformance(t *testing.T) {
	oauthstoretest.Run(t, func(t *testing.T) oauthstoretest.Open {
		dsn := pgtest.DSN(t)
		return func(keys *catalogstore.Keyring) oauthstoretest.Store {
			return openStore(t, newPool(t, dsn)).OAuth(keys)
		}
	})
}

// TestOAuthRefreshAcrossReplicas: two catalog replicas (two stores, two
// pools, one database) renew the same expiring connection at once against
// the local authorization server, whose refresh tokens rotate: exactly one
// refresh reaches the token endpoint and both replicas end with the new
// token. Without the cross-replica lock the second refresh would send the
// rotated-away refresh token, be rejected, and the connection would
// become NEEDS_AUTH.
func TestOAuthRefreshAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	keys, err := catalogstore.ParseKeyring(strings.Repeat("3c", 32))
	if err != nil {
		t.Fatal(err)
	}
	fx := oauthtest.New()
	defer fx.Close()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	redirect := "http://127.0.0.1:1/oauth/callback"
	replica := func(browse bool) *catalogoauth.Client {
		cfg := catalogoauth.Config{ServerURL: fx.URL(), RedirectURI: redirect, Now: clock, RefreshSkew: time.Minute,
			Store: openStore(t, newPool(t, dsn)).OAuth(keys).For("tracker", "default", "alice")}
		if browse {
			cfg.Authorize = func(ctx context.Context, authURL string) (*url.URL, error) {
				var back *url.URL
				hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
					if strings.HasPrefix(r.URL.String(), redirect) {
						back = r.URL
						return http.ErrUseLastResponse
					}
					return nil
				}}
				if _, _, err := oauthtest.BrowseWith(ctx, hc, authURL, "alice@example"); err != nil || back == nil {
					t.Fatalf("browse: %v", err)
				}
				return back, nil
			}
		}
		c, err := catalogoauth.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	r1, r2 := replica(true), replica(false)
	// Replica 1 logs in (401 → discovery, registration, PKCE login).
	hc := &http.Client{Transport: &catalogoauth.Transport{Client: r1}}
	req, _ := http.NewRequest(http.MethodPost, fx.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	first, err := r2.Token(ctx) // replica 2 reads the same row
	if err != nil || first == nil || resp.StatusCode == 401 {
		t.Fatalf("after login: %d %+v %v", resp.StatusCode, first, err)
	}
	mu.Lock()
	now = first.ExpiresAt.Add(-30 * time.Second) // inside the 60 s skew
	mu.Unlock()

	const perReplica = 3
	start := make(chan struct{})
	toks := make(chan *transport.Token, 2*perReplica)
	var wg sync.WaitGroup
	for i := range 2 * perReplica {
		c := r1
		if i%2 == 1 {
			c = r2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tok, err := c.Token(ctx)
			if err != nil {
				t.Errorf("replica %d: %v", i%2+1, err)
				return
			}
			toks <- tok
		}()
	}
	close(start)
	wg.Wait()
	close(toks)
	if n := fx.RefreshGrants.Load(); n != 1 {
		t.Fatalf("refresh grants = %d, want exactly 1 for two replicas", n)
	}
	stored, err := r1.Token(ctx)
	if err != nil || stored == nil || stored.AccessToken == first.AccessToken || stored.RefreshToken == first.RefreshToken {
		t.Fatalf("stored after the refresh: %+v %v", stored, err)
	}
	n := 0
	for tok := range toks {
		n++
		if tok.AccessToken != stored.AccessToken {
			t.Fatalf("a caller got %q, not the refreshed token", tok.AccessToken)
		}
	}
	if n != 2*perReplica {
		t.Fatalf("%d of %d callers got a token", n, 2*perReplica)
	}
}
