//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// Static tokens of the auth tests; only their SHA-256 goes into the config.
const (
	userToken    = "e2e-user-token-7f3a9c"    // kind user, alice@acme, roles [user]
	serviceToken = "e2e-service-token-51bd02" // kind service, svc:runtime
	adminToken   = "e2e-admin-token-c0ffee"   // kind user, root, roles [admin]
	jwtIssuer    = "e2e-issuer"
	jwtAudience  = "toolplane-e2e"
)

// authSetup is a running process with authentication on.
type authSetup struct {
	p *testkit.Process
	// sign signs claims with the configured JWT key; signBad with another key.
	sign, signBad func(jwt.MapClaims) string
}

// tokensYAML is the auth.tokens section for the three static tokens.
func tokensYAML() string {
	return fmt.Sprintf(`  tokens:
    - name: alice
      sha256: %s
      kind: user
      subject: alice
      tenant: acme
      roles: [user]
      attributes: {team: blue}
    - name: runtime
      sha256: %s
      kind: service
      subject: svc:runtime
      roles: [service]
    - name: root
      sha256: %s
      kind: user
      subject: root
      roles: [admin]
`, sha256Hex(userToken), sha256Hex(serviceToken), sha256Hex(adminToken))
}

// jwtKind selects the JWT algorithm of an auth process.
type jwtKind string

const (
	jwtHS256 jwtKind = "HS256"
	jwtES256 jwtKind = "ES256"
)

// startAuth starts a process with static tokens and JWTs of kind alg; with
// pki non-nil both listeners serve TLS (mTLS when mtls is true).
func startAuth(t *testing.T, alg jwtKind, pki *testkit.PKI, mtls bool) *authSetup {
	t.Helper()
	dir := t.TempDir()
	s := &authSetup{}
	var jwtYAML string
	switch alg {
	case jwtHS256:
		secret, bad := randomHex(t, 32), randomHex(t, 32)
		f := filepath.Join(dir, "hmac.secret")
		if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		jwtYAML = "    hmac_secret_file: " + f + "\n"
		s.sign = func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodHS256, []byte(secret), c) }
		s.signBad = func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodHS256, []byte(bad), c) }
	case jwtES256:
		key, bad := ecKey(t), ecKey(t)
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "jwt-pub.pem")
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		jwtYAML = "    public_key_file: " + f + "\n"
		s.sign = func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodES256, key, c) }
		s.signBad = func(c jwt.MapClaims) string { return signJWT(t, jwt.SigningMethodES256, bad, c) }
	}
	cfg := "auth:\n  enabled: true\n" + tokensYAML() + "  jwt:\n" + jwtYAML +
		"    issuer: " + jwtIssuer + "\n    audience: " + jwtAudience + "\n"
	o := testkit.Options{}
	if pki != nil {
		cfg += "server:\n  tls:\n    cert_file: " + pki.ServerCert + "\n    key_file: " + pki.ServerKey + "\n"
		if mtls {
			cfg += "    client_ca_file: " + pki.CAFile + "\n"
		}
		o.ClientTLS = pki.ClientTLS(mtls)
	}
	o.Config = cfg
	s.p = testkit.Start(t, o)
	return s
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signJWT(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claims returns valid claims for sub, modified by the extra pairs.
func claims(sub string, extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub": sub, "iss": jwtIssuer, "aud": jwtAudience, "tenant": "acme", "roles": []string{"user"},
		"iat": time.Now().Unix(), "exp": time.Now().Add(10 * time.Minute).Unix(),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// target is an RPC reached over gRPC and over REST.
type target struct {
	name string
	grpc func(t *testing.T, s *authSetup, auth string, kv ...string) error
	// restMethod, restPath and restBody describe the REST mirror call.
	restMethod, restPath, restBody string
}

var (
	tWhoAmI = target{name: "WhoAmI", restMethod: http.MethodGet, restPath: "/v1/testonly/whoami",
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			_, err := whoAmIAuth(t, s, a, kv...)
			return err
		}}
	tListTools = target{name: "catalog ListTools (service)", restMethod: http.MethodGet, restPath: "/v1/tools",
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			return invokeAuth(t, s, mListTools, a, &catalogv1.ListToolsRequest{}, &catalogv1.ListToolsResponse{}, kv...)
		}}
	tListPolicies = target{name: "authz ListPolicies (admin)", restMethod: http.MethodGet, restPath: "/v1/policies",
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			return invokeAuth(t, s, mListPolicies, a, &authzv1.ListPoliciesRequest{}, &authzv1.ListPoliciesResponse{}, kv...)
		}}
	tReloadServers = target{name: "catalog ReloadServers (admin)", restMethod: http.MethodPost, restPath: "/v1/servers:reload", restBody: "{}",
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			return invokeAuth(t, s, mReloadServers, a, &catalogv1.ReloadServersRequest{}, &catalogv1.ReloadServersResponse{}, kv...)
		}}
	tListThreads = target{name: "runtime ListThreads (public)", restMethod: http.MethodGet, restPath: "/v1/threads",
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			return invokeAuth(t, s, mListThreads, a, &runtimev1.ListThreadsRequest{}, &runtimev1.ListThreadsResponse{}, kv...)
		}}
	tMalformed = target{name: "CreateThread with a malformed body", restMethod: http.MethodPost, restPath: "/v1/threads", restBody: `{"title": `,
		grpc: func(t *testing.T, s *authSetup, a string, kv ...string) error {
			return invokeRaw(t, s.p.Dial(t), mCreateThread, "", malformedProto, withAuth(a, kv)...)
		}}
)

// withAuth prepends the authorization metadata (a full header value) to kv.
func withAuth(a string, kv []string) []string {
	if a == "" {
		return kv
	}
	return append([]string{"authorization", a}, kv...)
}

func invokeAuth(t *testing.T, s *authSetup, method, a string, req, resp any, kv ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return s.p.Dial(t).Invoke(outgoing(ctx, "", withAuth(a, kv)...), method, req, resp)
}

func whoAmIAuth(t *testing.T, s *authSetup, a string, kv ...string) (map[string]any, error) {
	t.Helper()
	return whoAmI(t, s.p.Dial(t), "", withAuth(a, kv)...)
}

func restAuth(t *testing.T, s *authSetup, tg target, a string, kv ...string) restResult {
	t.Helper()
	headers := slices.Clone(kv)
	if a != "" {
		headers = append(headers, "Authorization", a)
	}
	return rest(t, s.p, tg.restMethod, tg.restPath, "", tg.restBody, headers...)
}

func bearer(tok string) string { return "Bearer " + tok }

// authCase is one row of the auth matrix.
type authCase struct {
	name   string
	auth   string   // the authorization header value ("" = none)
	kv     []string // extra metadata / headers
	target target
	want   codes.Code // OK = admitted (anything but UNAUTHENTICATED / PERMISSION_DENIED)
}

func matrix(s *authSetup) []authCase {
	actAlice := []string{actingForKey, "acme/alice;roles=user"}
	return []authCase{
		{name: "no token", target: tWhoAmI, want: codes.Unauthenticated},
		{name: "no token, malformed body", target: tMalformed, want: codes.Unauthenticated},
		{name: "no token, admin RPC", target: tListPolicies, want: codes.Unauthenticated},
		{name: "wrong token", auth: bearer("not-a-known-token"), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "wrong token, malformed body", auth: bearer("not-a-known-token"), target: tMalformed, want: codes.Unauthenticated},
		{name: "hash of a token sent as the token", auth: bearer(sha256Hex(userToken)), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "not a bearer scheme", auth: "Basic " + userToken, target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT bad signature", auth: bearer(s.signBad(claims("bob"))), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT expired", auth: bearer(s.sign(claims("bob", "exp", time.Now().Add(-time.Hour).Unix()))), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT without exp", auth: bearer(s.sign(jwt.MapClaims{"sub": "bob", "iss": jwtIssuer, "aud": jwtAudience})), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT wrong audience", auth: bearer(s.sign(claims("bob", "aud", "someone-else"))), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT wrong issuer", auth: bearer(s.sign(claims("bob", "iss", "mallory"))), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "JWT alg none", auth: bearer(noneJWT(claims("bob"))), target: tWhoAmI, want: codes.Unauthenticated},
		{name: "user calls a service RPC", auth: bearer(userToken), target: tListTools, want: codes.PermissionDenied},
		{name: "user calls an admin RPC", auth: bearer(userToken), target: tListPolicies, want: codes.PermissionDenied},
		{name: "user calls another admin RPC", auth: bearer(userToken), target: tReloadServers, want: codes.PermissionDenied},
		{name: "JWT user calls a service RPC", auth: bearer(s.sign(claims("bob"))), target: tListTools, want: codes.PermissionDenied},
		{name: "service calls an admin RPC", auth: bearer(serviceToken), target: tListPolicies, want: codes.PermissionDenied},
		{name: "user sends acting-for", auth: bearer(userToken), kv: actAlice, target: tWhoAmI, want: codes.PermissionDenied},
		{name: "user sends acting-for to a public RPC", auth: bearer(userToken), kv: actAlice, target: tListThreads, want: codes.PermissionDenied},
		{name: "JWT user sends acting-for", auth: bearer(s.sign(claims("bob"))), kv: actAlice, target: tWhoAmI, want: codes.PermissionDenied},
		{name: "admin user sends acting-for", auth: bearer(adminToken), kv: actAlice, target: tWhoAmI, want: codes.PermissionDenied},
		{name: "service sends malformed acting-for", auth: bearer(serviceToken), kv: []string{actingForKey, "alice"}, target: tWhoAmI, want: codes.PermissionDenied},
		{name: "user calls a public RPC", auth: bearer(userToken), target: tListThreads, want: codes.OK},
		{name: "JWT user calls a public RPC", auth: bearer(s.sign(claims("bob"))), target: tListThreads, want: codes.OK},
		{name: "service calls a service RPC", auth: bearer(serviceToken), target: tListTools, want: codes.OK},
		{name: "admin calls an admin RPC", auth: bearer(adminToken), target: tListPolicies, want: codes.OK},
		{name: "admin calls a service RPC", auth: bearer(adminToken), target: tListTools, want: codes.OK},
		{name: "service JWT calls a service RPC", auth: bearer(s.sign(claims("svc:jwt", "toolplane_kind", "service", "roles", []string{}))), target: tListTools, want: codes.OK},
	}
}

// noneJWT is an unsigned JWT (alg "none").
func noneJWT(c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		panic(err)
	}
	return s
}

// runMatrix runs every case over gRPC and over REST.
func runMatrix(t *testing.T, s *authSetup) {
	for _, tc := range matrix(s) {
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			err := tc.target.grpc(t, s, tc.auth, tc.kv...)
			if tc.want == codes.OK {
				notDenied(t, tc.target.name, err)
				return
			}
			wantCode(t, tc.target.name, err, tc.want)
		})
		t.Run("rest/"+tc.name, func(t *testing.T) {
			r := restAuth(t, s, tc.target, tc.auth, tc.kv...)
			if tc.want == codes.OK {
				if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
					t.Errorf("%s %s: %d %s, want it admitted", tc.target.restMethod, tc.target.restPath, r.Status, r.Raw)
				}
				return
			}
			if r.Status != httpStatus(tc.want) {
				t.Errorf("%s %s: HTTP %d %s, want %d", tc.target.restMethod, tc.target.restPath, r.Status, r.Raw, httpStatus(tc.want))
			}
			if c, ok := r.Body["code"].(float64); !ok || codes.Code(c) != tc.want {
				t.Errorf("%s %s: error body %s, want code %d", tc.target.restMethod, tc.target.restPath, r.Raw, tc.want)
			}
		})
	}
}

// checkPrincipals: the principal that reaches the handler, over gRPC and REST.
func checkPrincipals(t *testing.T, s *authSetup) {
	type who struct {
		subject, tenant, callerSubject, callerKind string
		roles                                      []string
		attrs                                      map[string]string
	}
	check := func(t *testing.T, got map[string]any, want who) {
		t.Helper()
		attrs := map[string]string{}
		if m, ok := got["attributes"].(map[string]any); ok {
			for k, v := range m {
				attrs[k] = fmt.Sprint(v)
			}
		}
		if want.attrs == nil {
			want.attrs = map[string]string{}
		}
		if got["subject"] != want.subject || got["tenant"] != want.tenant || !slices.Equal(stringsOf(got["roles"]), want.roles) ||
			fmt.Sprint(attrs) != fmt.Sprint(want.attrs) || got["caller_subject"] != want.callerSubject || got["caller_kind"] != want.callerKind {
			t.Errorf("principal at the handler: %v, want %+v", got, want)
		}
	}
	cases := []struct {
		name string
		auth string
		kv   []string
		want who
	}{
		{"user token", bearer(userToken), nil, who{"alice", "acme", "alice", "user", []string{"user"}, map[string]string{"team": "blue"}}},
		{"JWT", bearer(s.sign(claims("bob", "attributes", map[string]string{"dept": "ops"}))), nil, who{"bob", "acme", "bob", "user", []string{"user"}, map[string]string{"dept": "ops"}}},
		{"JWT within leeway", bearer(s.sign(claims("bob", "exp", time.Now().Add(-5*time.Second).Unix()))), nil, who{"bob", "acme", "bob", "user", []string{"user"}, nil}},
		{"service acting for alice", bearer(serviceToken), []string{actingForKey, "acme/alice;roles=user,reader;attr.team=blue"},
			who{"alice", "acme", "svc:runtime", "service", []string{"user", "reader"}, map[string]string{"team": "blue"}}},
		{"service JWT acting for carol", bearer(s.sign(claims("svc:jwt", "toolplane_kind", "service"))), []string{actingForKey, "other/carol"},
			who{"carol", "other", "svc:jwt", "service", nil, nil}},
		{"service without acting-for", bearer(serviceToken), nil, who{"svc:runtime", "default", "svc:runtime", "service", []string{"service"}, nil}},
	}
	for _, tc := range cases {
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			got, err := whoAmIAuth(t, s, tc.auth, tc.kv...)
			if err != nil {
				t.Fatalf("WhoAmI: %v", err)
			}
			check(t, got, tc.want)
		})
		t.Run("rest/"+tc.name, func(t *testing.T) {
			r := restAuth(t, s, tWhoAmI, tc.auth, tc.kv...)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /v1/testonly/whoami: %d %s", r.Status, r.Raw)
			}
			check(t, r.Body, tc.want)
		})
	}
}

// checkNoTokenNeeded: health and reflection need no credential; the
// operational HTTP endpoints neither.
func checkNoTokenNeeded(t *testing.T, s *authSetup) {
	conn := s.p.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", "toolplane.catalog.v1.CatalogService", "toolplane.runtime.v1.RuntimeService"} {
		st, err := s.p.Health(ctx, conn, svc)
		if err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q without a token: %s, %v", svc, st, err)
		}
	}
	if names := listServices(t, conn); !slices.Contains(names, "toolplane.authz.v1.AuthzService") {
		t.Errorf("reflection without a token: %v", names)
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics"} {
		if r := rest(t, s.p, http.MethodGet, path, "", ""); r.Status != http.StatusOK {
			t.Errorf("GET %s without a token: %d", path, r.Status)
		}
	}
}

// checkValidationAfterAuth: the chain authenticates before it validates.
func checkValidationAfterAuth(t *testing.T, s *authSetup) {
	conn := s.p.Dial(t)
	bad := durationpb.New(-time.Second)
	wantCode(t, "invalid Sleep without a token", invoke(t, conn, mSleep, "", bad, nil), codes.Unauthenticated)
	err := invoke(t, conn, mSleep, userToken, bad, nil)
	wantCode(t, "invalid Sleep with a token", err, codes.InvalidArgument)
	if err != nil && !strings.Contains(err.Error(), "duration") {
		t.Errorf("validation error %q does not name the field", err)
	}
}

// TestAuthPlaintext: the whole matrix with HS256 JWTs, no TLS.
func TestAuthPlaintext(t *testing.T) {
	s := startAuth(t, jwtHS256, nil, false)
	t.Run("self-minted service token", func(t *testing.T) { checkSelfToken(t, s) })
	t.Run("matrix", func(t *testing.T) { runMatrix(t, s) })
	t.Run("principal", func(t *testing.T) { checkPrincipals(t, s) })
	t.Run("no token needed", func(t *testing.T) { checkNoTokenNeeded(t, s) })
	t.Run("validation after auth", func(t *testing.T) { checkValidationAfterAuth(t, s) })
	t.Run("token never logged", func(t *testing.T) {
		for _, tok := range []string{userToken, serviceToken, adminToken} {
			if strings.Contains(s.p.Stderr(), tok) {
				t.Errorf("a plaintext token appears in the log")
			}
		}
	})
}

// TestAuthTLS: the whole matrix over TLS on both listeners, with ES256 JWTs.
func TestAuthTLS(t *testing.T) {
	pki := testkit.NewPKI(t)
	s := startAuth(t, jwtES256, pki, false)
	t.Run("matrix", func(t *testing.T) { runMatrix(t, s) })
	t.Run("principal", func(t *testing.T) { checkPrincipals(t, s) })
	t.Run("no token needed", func(t *testing.T) { checkNoTokenNeeded(t, s) })
	t.Run("plaintext client refused", func(t *testing.T) {
		plain := &testkit.Process{GRPCAddr: s.p.GRPCAddr, HTTPAddr: s.p.HTTPAddr}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := plain.Health(ctx, plain.Dial(t), ""); err == nil {
			t.Error("a plaintext gRPC client reached a TLS listener")
		}
	})
	t.Run("healthcheck command over TLS", func(t *testing.T) {
		if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", s.p.GRPCAddr, "--tls-ca", pki.CAFile); r.Code != 0 {
			t.Errorf("healthcheck --tls-ca: exit %d, stderr %q", r.Code, r.Stderr)
		}
		if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", s.p.GRPCAddr, "--timeout", "1s"); r.Code != 1 {
			t.Errorf("plaintext healthcheck of a TLS listener: exit %d, want 1", r.Code)
		}
	})
	t.Run("HS256 token refused by an ES256 verifier", func(t *testing.T) {
		hs := signJWT(t, jwt.SigningMethodHS256, []byte(randomHex(t, 32)), claims("bob"))
		_, err := whoAmIAuth(t, s, bearer(hs))
		wantCode(t, "HS256 JWT", err, codes.Unauthenticated)
	})
}

// TestMTLS: with server.tls.client_ca_file set, a client without a
// certificate is refused on both listeners; with one it is served.
func TestMTLS(t *testing.T) {
	pki := testkit.NewPKI(t)
	s := startAuth(t, jwtHS256, pki, true)

	noCert := &testkit.Process{GRPCAddr: s.p.GRPCAddr, HTTPAddr: s.p.HTTPAddr, ClientTLS: pki.ClientTLS(false)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := noCert.Health(ctx, noCert.Dial(t), ""); err == nil {
		t.Errorf("gRPC client without a certificate was served (health %s)", st)
	}
	if _, err := whoAmI(t, noCert.Dial(t), userToken); err == nil {
		t.Errorf("gRPC client without a certificate reached WhoAmI")
	}
	if resp, err := noCert.HTTPClient().Get(noCert.URL("/healthz")); err == nil {
		resp.Body.Close()
		t.Errorf("HTTPS client without a certificate was served: %d", resp.StatusCode)
	}

	// The healthcheck command needs the client certificate too.
	if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", s.p.GRPCAddr, "--tls-ca", pki.CAFile, "--timeout", "2s"); r.Code != 1 {
		t.Errorf("healthcheck without a client certificate: exit %d, want 1", r.Code)
	}
	if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", s.p.GRPCAddr, "--tls-ca", pki.CAFile, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey); r.Code != 0 {
		t.Errorf("healthcheck with a client certificate: exit %d, stderr %q", r.Code, r.Stderr)
	}

	// With the client certificate: served, and the token still required.
	got, err := whoAmI(t, s.p.Dial(t), userToken)
	if err != nil || got["subject"] != "alice" {
		t.Errorf("WhoAmI with a client certificate: %v, %v", got, err)
	}
	_, err = whoAmI(t, s.p.Dial(t), "")
	wantCode(t, "WhoAmI with a client certificate but no token", err, codes.Unauthenticated)
	if r := rest(t, s.p, http.MethodGet, "/v1/testonly/whoami", userToken, ""); r.Status != http.StatusOK {
		t.Errorf("REST WhoAmI with a client certificate: %d %s", r.Status, r.Raw)
	}
}

// checkSelfToken: with authentication on, the all-in-one runtime reaches its
// in-process upstreams with the service token the process minted at start
// (no token in the config is a service token it could use). The runtime
// follows WatchCatalog and WatchPolicy (services/runtime/watch.go), class
// service: the streams are started (past authentication) and none was
// refused by the class check.
func checkSelfToken(t *testing.T, s *authSetup) {
	for _, m := range []struct{ svc, method string }{
		{"toolplane.catalog.v1.CatalogService", "WatchCatalog"},
		{"toolplane.authz.v1.AuthzService", "WatchPolicy"},
	} {
		testkit.Eventually(t, 10*time.Second, "the runtime's "+m.method+" admitted", func() error {
			mt := scrape(t, s.p)
			sel := []string{`grpc_service="` + m.svc + `"`, `grpc_method="` + m.method + `"`}
			if n := mt.sum("grpc_server_started_total", sel...); n < 1 {
				return fmt.Errorf("%s started %v times", m.method, n)
			}
			for _, code := range []string{"Unauthenticated", "PermissionDenied"} {
				if n := mt.sum("grpc_server_handled_total", append(sel, `grpc_code="`+code+`"`)...); n != 0 {
					return fmt.Errorf("%s refused %v times with %s", m.method, n, code)
				}
			}
			return nil
		})
	}
}
