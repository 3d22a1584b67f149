//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolplane/toolplane/internal/testkit"
)

const splitServiceToken = "e2e-split-service-token-9d41"

// splitAuthYAML: authentication on, one service token and one user token.
func splitAuthYAML() string {
	return fmt.Sprintf(`auth:
  enabled: true
  tokens:
    - {name: runtime, sha256: %s, kind: service, subject: "svc:runtime", roles: [service]}
    - {name: alice, sha256: %s, kind: user, subject: alice, roles: [user]}
`, sha256Hex(splitServiceToken), sha256Hex(userToken))
}

// readyz fetches /readyz: status, the runtime's entry, and not_ready.
func readyz(t *testing.T, p *testkit.Process) (int, map[string]string, []string) {
	t.Helper()
	r := rest(t, p, http.MethodGet, "/readyz", "", "")
	services := map[string]string{}
	if m, ok := r.Body["services"].(map[string]any); ok {
		for k, v := range m {
			services[k] = fmt.Sprint(v)
		}
	}
	return r.Status, services, stringsOf(r.Body["not_ready"])
}

// waitRuntimeNotReady waits until the runtime's /readyz is 503 with the
// runtime's entry naming exactly the upstreams in down.
func waitRuntimeNotReady(t *testing.T, rt *testkit.Process, down ...string) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("runtime /readyz names %v", down), func() error {
		code, services, notReady := readyz(t, rt)
		msg := services["runtime"]
		if code != http.StatusServiceUnavailable || !slices.Contains(notReady, "runtime") {
			return fmt.Errorf("/readyz %d, not_ready %v, runtime %q", code, notReady, msg)
		}
		for _, up := range []string{"catalog", "authz", "skills"} {
			if named := strings.Contains(msg, up); named != slices.Contains(down, up) {
				return fmt.Errorf("runtime readiness %q: names %s = %v, want %v", msg, up, named, !named)
			}
		}
		return nil
	})
}

func waitRuntimeReady(t *testing.T, rt *testkit.Process) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, "runtime /readyz 200", func() error {
		if code, services, _ := readyz(t, rt); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %v", code, services)
		}
		return nil
	})
	if err := rt.WaitHealth(t, "toolplane.runtime.v1.RuntimeService", healthpb.HealthCheckResponse_SERVING, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestSplitTopology: four processes on loopback with authentication on; the
// runtime reaches the other three through its configured upstreams (with a
// service token from a file), is ready only when all three are, and its
// readiness names the upstream that went away.
func TestSplitTopology(t *testing.T) {
	addrs := map[string][2]string{}
	for _, s := range []string{"catalog", "authz", "skills", "runtime"} {
		addrs[s] = [2]string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
	}
	startUp := func(name string) *testkit.Process {
		t.Helper()
		return testkit.Start(t, testkit.Options{
			Args:     []string{"--services", name},
			Config:   splitAuthYAML(),
			GRPCAddr: addrs[name][0], HTTPAddr: addrs[name][1],
		})
	}
	procs := map[string]*testkit.Process{}
	procs["catalog"] = startUp("catalog")
	procs["authz"] = startUp("authz")

	tokenFile := filepath.Join(t.TempDir(), "runtime.token")
	if err := os.WriteFile(tokenFile, []byte(splitServiceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rtCfg := splitAuthYAML() + "runtime:\n  upstreams:\n"
	for _, up := range []string{"catalog", "authz", "skills"} {
		rtCfg += fmt.Sprintf("    %s:\n      address: %s\n      token_file: %s\n", up, addrs[up][0], tokenFile)
	}
	rt := testkit.Start(t, testkit.Options{
		Args:     []string{"--services", "runtime"},
		Config:   rtCfg,
		GRPCAddr: addrs["runtime"][0], HTTPAddr: addrs["runtime"][1],
		Wait: testkit.WaitLive,
	})
	rtConn := rt.Dial(t)

	t.Run("not ready without skills", func(t *testing.T) {
		waitRuntimeNotReady(t, rt, "skills")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, svc := range []string{"", "toolplane.runtime.v1.RuntimeService"} {
			if st, err := rt.Health(ctx, rtConn, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("runtime health %q without skills: %s, %v; want NOT_SERVING", svc, st, err)
			}
		}
	})

	procs["skills"] = startUp("skills")
	t.Run("ready with all three", func(t *testing.T) {
		waitRuntimeReady(t, rt)
		r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", rt.GRPCAddr)
		if r.Code != 0 {
			t.Errorf("healthcheck of the runtime: exit %d, %s", r.Code, r.Stderr)
		}
	})

	t.Run("each process serves only its service", func(t *testing.T) {
		for name, p := range procs {
			names := listServices(t, p.Dial(t))
			for _, sd := range suiteServices {
				own := strings.Contains(sd.ServiceName, "."+name+".")
				if slices.Contains(names, sd.ServiceName) != own {
					t.Errorf("%s process: reflection lists %v", name, names)
				}
			}
		}
		names := listServices(t, rtConn)
		if !slices.Contains(names, "toolplane.runtime.v1.RuntimeService") || slices.Contains(names, "toolplane.catalog.v1.CatalogService") {
			t.Errorf("runtime process: reflection lists %v", names)
		}
	})

	t.Run("auth on every process", func(t *testing.T) {
		// The upstreams accept the runtime's service token and refuse none.
		for _, name := range []string{"catalog", "authz", "skills"} {
			p := procs[name]
			_, err := whoAmI(t, p.Dial(t), "")
			wantCode(t, name+" without a token", err, codes.Unauthenticated)
			got, err := whoAmI(t, p.Dial(t), splitServiceToken)
			if err != nil || got["caller_kind"] != "service" {
				t.Errorf("%s with the runtime's token: %v, %v", name, got, err)
			}
		}
		_, err := whoAmI(t, rtConn, "")
		wantCode(t, "runtime without a token", err, codes.Unauthenticated)
	})

	t.Run("stopping authz is named", func(t *testing.T) {
		if code := procs["authz"].Stop(t); code != 0 {
			t.Errorf("authz exited %d", code)
		}
		waitRuntimeNotReady(t, rt, "authz")
		if err := rt.WaitHealth(t, "toolplane.runtime.v1.RuntimeService", healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second); err != nil {
			t.Error(err)
		}
		if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", rt.GRPCAddr); r.Code != 1 {
			t.Errorf("healthcheck of a runtime without authz: exit %d, want 1", r.Code)
		}
	})

	t.Run("recovers when authz is back", func(t *testing.T) {
		procs["authz"] = startUp("authz")
		waitRuntimeReady(t, rt)
	})

	t.Run("stopping two is named", func(t *testing.T) {
		procs["catalog"].Stop(t)
		procs["skills"].Stop(t)
		waitRuntimeNotReady(t, rt, "catalog", "skills")
	})
}
