//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestSplitUpstreamMTLS: the runtime reaches an upstream that requires
// mTLS through runtime.upstreams.<svc>.tls (CA, client certificate); without
// the client certificate the runtime is not ready and names that upstream.
func TestSplitUpstreamMTLS(t *testing.T) {
	pki := testkit.NewPKI(t)
	tlsYAML := "server:\n  tls:\n    cert_file: " + pki.ServerCert + "\n    key_file: " + pki.ServerKey + "\n    client_ca_file: " + pki.CAFile + "\n"
	up := map[string]*testkit.Process{}
	for _, name := range []string{"catalog", "authz", "skills"} {
		o := testkit.Options{Args: []string{"--services", name}, Config: splitAuthYAML()}
		if name == "catalog" {
			o.Config += tlsYAML
			o.ClientTLS = pki.ClientTLS(true)
		}
		up[name] = testkit.Start(t, o)
	}
	tokenFile := filepath.Join(t.TempDir(), "runtime.token")
	if err := os.WriteFile(tokenFile, []byte(splitServiceToken), 0o600); err != nil {
		t.Fatal(err)
	}
	runtimeCfg := func(catalogTLS string) string {
		c := splitAuthYAML() + "runtime:\n  upstreams:\n"
		for _, name := range []string{"catalog", "authz", "skills"} {
			c += fmt.Sprintf("    %s:\n      address: %s\n      token_file: %s\n", name, up[name].GRPCAddr, tokenFile)
			if name == "catalog" {
				c += catalogTLS
			}
		}
		return c
	}

	t.Run("with a client certificate", func(t *testing.T) {
		rt := testkit.Start(t, testkit.Options{Args: []string{"--services", "runtime"}, Wait: testkit.WaitLive,
			Config: runtimeCfg("      tls:\n        enabled: true\n        ca_file: " + pki.CAFile + "\n        cert_file: " + pki.ClientCert + "\n        key_file: " + pki.ClientKey + "\n")})
		waitRuntimeReady(t, rt)
	})
	t.Run("without a client certificate", func(t *testing.T) {
		rt := testkit.Start(t, testkit.Options{Args: []string{"--services", "runtime"}, Wait: testkit.WaitLive,
			Config: runtimeCfg("      tls:\n        enabled: true\n        ca_file: " + pki.CAFile + "\n")})
		waitRuntimeNotReady(t, rt, "catalog")
	})
	t.Run("plaintext to a TLS upstream", func(t *testing.T) {
		rt := testkit.Start(t, testkit.Options{Args: []string{"--services", "runtime"}, Wait: testkit.WaitLive, Config: runtimeCfg("")})
		waitRuntimeNotReady(t, rt, "catalog")
	})
}
