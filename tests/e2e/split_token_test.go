//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestSplitWrongUpstreamToken: gRPC health needs no credential, so a
// runtime whose token_file holds a token the upstreams do not accept must
// still report not ready, naming every upstream that refuses it.
func TestSplitWrongUpstreamToken(t *testing.T) {
	addrs := map[string][2]string{}
	for _, s := range []string{"catalog", "authz", "skills", "runtime"} {
		addrs[s] = [2]string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
	}
	for _, name := range []string{"catalog", "authz", "skills"} {
		testkit.Start(t, testkit.Options{
			Args:     []string{"--services", name},
			Config:   splitAuthYAML(),
			GRPCAddr: addrs[name][0], HTTPAddr: addrs[name][1],
		})
	}
	tokenFile := filepath.Join(t.TempDir(), "runtime.token")
	if err := os.WriteFile(tokenFile, []byte("not-a-token-anyone-knows\n"), 0o600); err != nil {
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
	waitRuntimeNotReady(t, rt, "catalog", "authz", "skills")
	_, services, _ := readyz(t, rt)
	t.Logf("runtime readiness: %s", services["runtime"])
}
