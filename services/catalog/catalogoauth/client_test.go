package catalogoauth

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// TestRefreshBeforeExpiry: a token within refresh_skew of its expiry is
// refreshed before the request is sent (no 401 first), once for concurrent
// callers; the rotated refresh token is stored.
func TestRefreshBeforeExpiry(t *testing.T) {
	fx := oauthtest.New()
	defer fx.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	redirect := "http://127.0.0.1:1/oauth/callback"
	c, err := New(Config{ServerURL: fx.URL(), RedirectURI: redirect, Now: clock, RefreshSkew: time.Minute,
		Authorize: func(ctx context.Context, authURL string) (*url.URL, error) {
			var back *url.URL
			hc := &http.Client{CheckRedirect: func(r *http.Request, _ []*http.Request) error {
				if strings.HasPrefix(r.URL.String(), redirect) {
					back = r.URL
					return http.ErrUseLastResponse
				}
				return nil
			}}
			st, _, err := oauthtest.BrowseWith(ctx, hc, authURL, "u1")
			if err != nil || back == nil {
				t.Fatalf("browse: %d %v", st, err)
			}
			return back, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &Transport{Client: c}}
	// get may run on other goroutines: it reports with t.Error.
	get := func() {
		req, _ := http.NewRequest(http.MethodPost, fx.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode == 401 {
			t.Error("401 after login")
		}
	}
	get() // 401 -> discovery, registration, login
	first, _ := c.cfg.Store.GetToken(context.Background())
	unauth := fx.MCPUnauthorized.Load()
	get()
	if fx.RefreshGrants.Load() != 0 {
		t.Fatal("refreshed a fresh token")
	}
	now = first.ExpiresAt.Add(-30 * time.Second) // inside the 60 s skew
	done := make(chan struct{})
	for range 4 {
		go func() { defer func() { done <- struct{}{} }(); get() }()
	}
	for range 4 {
		<-done
	}
	if n := fx.RefreshGrants.Load(); n != 1 {
		t.Fatalf("refresh grants = %d, want 1 shared by the callers", n)
	}
	if d := fx.MCPUnauthorized.Load() - unauth; d != 0 {
		t.Fatalf("%d requests went out with the expiring token and got 401", d)
	}
	cur, _ := c.cfg.Store.GetToken(context.Background())
	if cur.RefreshToken == first.RefreshToken || cur.AccessToken == first.AccessToken {
		t.Fatal("the rotated tokens were not stored")
	}
}
