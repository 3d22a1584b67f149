package catalog

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// TestOAuthLoginAcrossReplicas: two catalogs on one PostgreSQL database
// (storage.dsn), behind one public_url whose "load balancer" sends the
// browser's callback to the other replica: a login started on replica A
// completes on B, A's shared server leaves NEEDS_AUTH without a login of
// its own and calls work on both; a per_user login started on B
// completes on A and both list it; a state is single use across replicas.
func TestOAuthLoginAcrossReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	fx := oauthtest.New()
	t.Cleanup(fx.Close)
	var lb atomic.Pointer[http.Handler] // where the callback lands
	var lastCallback atomic.Pointer[string]
	cbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := r.URL.String()
		lastCallback.Store(&u)
		(*lb.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(cbSrv.Close)
	t.Setenv("TP_TEST_OAUTH_KEYS", strings.Repeat("4d", 32))
	ext := extJSON(
		fmt.Sprintf(`"docs": {"type": "http", "url": %q}`, fx.URL()),
		fmt.Sprintf(`"tracker": {"type": "http", "url": %q, "session_scope": "per_user"}`, fx.URL()))
	replica := func() *harness {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return start(t, ext, func(c *Config, env *svckit.Env) {
			env.Postgres = pool
			c.OAuth = OAuthConfig{PublicURL: cbSrv.URL, KeyEnv: "TP_TEST_OAUTH_KEYS"}
		})
	}
	a, b := replica(), replica()
	routeA, routeB := a.srv.HTTPRoutes()["GET /oauth/callback"], b.srv.HTTPRoutes()["GET /oauth/callback"]
	ctx := ctxT(t)

	// Shared server: the admin starts on A, the callback lands on B.
	lb.Store(&routeB)
	r, err := a.admin.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), "root@example"); err != nil || st != 200 || !strings.Contains(body, "docs is connected") {
		t.Fatalf("callback on the other replica: %d %q %v", st, body, err)
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		eventually(t, 45*time.Second, "docs READY on "+name, func() bool { return h.server("docs").GetState() == catalogv1.ServerState_SERVER_STATE_READY })
		eventually(t, 10*time.Second, "docs_whoami as root@example on "+name, func() bool {
			res, err := h.call(ctx, h.svc, "docs_whoami", `{}`)
			return err == nil && textOf(res) == "root@example"
		})
	}
	// The same callback again, on either replica: the state was used.
	for name, route := range map[string]http.Handler{"A": routeA, "B": routeB} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, *lastCallback.Load(), nil)
		route.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("replayed callback on %s: %d %s", name, rec.Code, rec.Body)
		}
	}

	// per_user: the admin's own connection, started on B, lands on A.
	lb.Store(&routeA)
	r, err = b.admin.ConnectServer(ctx, &catalogv1.ConnectServerRequest{Name: "tracker"})
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := oauthtest.Browse(ctx, r.GetAuthorizationUrl(), "root@example"); err != nil || st != 200 {
		t.Fatalf("per_user callback on the other replica: %d %q %v", st, body, err)
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		lr, err := h.admin.ListConnections(ctx, &catalogv1.ListConnectionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range lr.GetConnections() {
			got[c.GetServer()] = c.GetConnected()
		}
		if !got["docs"] || !got["tracker"] {
			t.Fatalf("connections on %s: %v", name, got)
		}
		// Another principal has no tracker connection on either.
		lr, _ = h.svc.ListConnections(ctx, &catalogv1.ListConnectionsRequest{})
		for _, c := range lr.GetConnections() {
			if c.GetServer() == "tracker" && c.GetConnected() {
				t.Fatalf("the service principal sees the admin's tracker connection on %s", name)
			}
		}
	}
	// One registration per server (docs on A, tracker on B), none per
	// replica: B's docs and A's tracker clients came from the database.
	if n := fx.Registrations.Load(); n != 2 {
		t.Errorf("%d dynamic registrations for two servers across two replicas, want 2 (clients are shared)", n)
	}
}
