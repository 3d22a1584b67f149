//go:build e2e

package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// TestConfigErrors: each configuration error exits 2 before anything
// listens, with exactly one stderr line naming the key or flag and the reason.
func TestConfigErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyAddr := busy.Addr().String()

	dir := t.TempDir()
	regularFile := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(regularFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok := sha256Hex("some-token")

	cases := []struct {
		name string
		args []string
		env  []string
		// want are substrings of the one stderr line: the key or flag first.
		want []string
		// noHTTPFlag: do not add --http-addr (the case sets it in the file or env).
		noHTTPFlag bool
	}{
		{
			name: "unknown key",
			args: []string{"--config", writeFile("unknown.yaml", "server:\n  grpc_addr: 127.0.0.1:0\n  bogus: 1\n")},
			want: []string{"server.bogus", "unknown key", "line 3"},
		},
		{
			name: "unknown nested key",
			args: []string{"--config", writeFile("unknown2.yaml", "auth:\n  tokens:\n    - name: a\n      sha256: "+tok+"\n      kind: user\n      subject: a\n      colour: red\n")},
			want: []string{"auth.tokens[0].colour", "unknown key"},
		},
		{
			name: "unknown top-level section",
			args: []string{"--config", writeFile("unknown3.yaml", "servers:\n  grpc_addr: 127.0.0.1:0\n")},
			want: []string{"servers", "unknown key"},
		},
		{
			name: "value of the wrong type",
			args: []string{"--config", writeFile("type.yaml", "server:\n  max_message_bytes: lots\n")},
			want: []string{"server.max_message_bytes", "line 2"},
		},
		{
			name: "malformed grpc address",
			args: []string{"--grpc-addr", "nonsense"},
			want: []string{"--grpc-addr", "malformed address", "nonsense"},
		},
		{
			name: "malformed http address",
			args: []string{"--http-addr", "127.0.0.1:99999"},
			want: []string{"--http-addr", "malformed address"},
		},
		{
			name:       "malformed address in file",
			args:       []string{"--config", writeFile("addr.yaml", "server:\n  http_addr: localhost\n")},
			want:       []string{"server.http_addr", "malformed address"},
			noHTTPFlag: true,
		},
		{
			name: "grpc port in use",
			args: []string{"--grpc-addr", busyAddr},
			want: []string{"--grpc-addr", "port in use", busyAddr},
		},
		{
			name: "http port in use",
			args: []string{"--http-addr", busyAddr},
			want: []string{"--http-addr", "port in use", busyAddr},
		},
		{
			name: "unwritable data dir",
			args: []string{"--data-dir", filepath.Join(regularFile, "data")},
			want: []string{"--data-dir", regularFile},
		},
		{
			name: "data dir is a file",
			args: []string{"--data-dir", regularFile},
			want: []string{"--data-dir", regularFile},
		},
		{
			name: "non-loopback address with auth off",
			args: []string{"--grpc-addr", "0.0.0.0:0"},
			want: []string{"server.grpc_addr", "non-loopback", "0.0.0.0:0", "auth"},
		},
		{
			name:       "non-loopback http address with auth off",
			env:        []string{"TOOLPLANE_SERVER_HTTP_ADDR=0.0.0.0:0"},
			want:       []string{"server.http_addr", "non-loopback"},
			noHTTPFlag: true,
		},
		{
			name: "bad token kind",
			args: []string{"--config", writeFile("kind.yaml", "auth:\n  enabled: true\n  tokens:\n    - name: a\n      sha256: "+tok+"\n      kind: robot\n      subject: a\n")},
			want: []string{"auth.tokens[0].kind", "robot"},
		},
		{
			name: "plaintext token instead of hash",
			args: []string{"--config", writeFile("hash.yaml", "auth:\n  enabled: true\n  tokens:\n    - name: a\n      sha256: my-secret-token\n      kind: user\n      subject: a\n")},
			want: []string{"auth.tokens[0].sha256", "SHA-256"},
		},
		{
			name: "bad env value",
			env:  []string{"TOOLPLANE_SERVER_SHUTDOWN_TIMEOUT=soon"},
			want: []string{"TOOLPLANE_SERVER_SHUTDOWN_TIMEOUT", "soon"},
		},
		{
			name: "unknown service",
			args: []string{"--services", "catalog,billing"},
			want: []string{"server.services", "billing"},
		},
		{
			name: "runtime without upstream address",
			args: []string{"--services", "runtime,catalog"},
			want: []string{"runtime.upstreams.authz.address", "required"},
		},
		{
			name: "missing config file",
			args: []string{"--config", filepath.Join(dir, "absent.yaml")},
			want: []string{"--config", "absent.yaml"},
		},
		{
			name: "missing JWT secret file",
			args: []string{"--config", writeFile("jwt.yaml", "auth:\n  enabled: true\n  jwt:\n    hmac_secret_file: "+filepath.Join(dir, "no-secret")+"\n")},
			want: []string{"auth.jwt.hmac_secret_file", "no-secret"},
		},
		{
			name: "malformed extensions config",
			args: []string{"--extensions-config", writeFile("ext.json", `{"mcpServers": {"x": {"command": 5}}}`)},
			want: []string{"catalog.extensions_config", "ext.json"},
		},
		{
			name: "missing upstream token file",
			args: []string{"--services", "runtime", "--config", writeFile("up.yaml", "runtime:\n  upstreams:\n"+
				"    catalog: {address: 127.0.0.1:1, token_file: "+filepath.Join(dir, "no-token")+"}\n"+
				"    authz: {address: 127.0.0.1:1}\n    skills: {address: 127.0.0.1:1}\n")},
			want: []string{"runtime.upstreams.catalog.token_file", "no-token"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve"}, tc.args...)
			if !hasFlag(args, "--grpc-addr") {
				args = append(args, "--grpc-addr", testkit.FreeAddr(t))
			}
			if !hasFlag(args, "--http-addr") && !tc.noHTTPFlag {
				args = append(args, "--http-addr", testkit.FreeAddr(t))
			}
			if !hasFlag(args, "--data-dir") {
				args = append(args, "--data-dir", filepath.Join(t.TempDir(), "data"))
			}
			r := testkit.Run(t, tc.env, args...)
			lines := r.StderrLines()
			if r.Code != 2 || len(lines) != 1 {
				t.Fatalf("toolplane %s: exit %d with %d stderr lines, want exit 2 and one line; stderr:\n%s", strings.Join(args, " "), r.Code, len(lines), r.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("stderr line %q does not contain %q", lines[0], w)
				}
			}
			if r.Stdout != "" {
				t.Errorf("stdout not empty: %q", r.Stdout)
			}
		})
	}
}

// TestConfigErrorBeforeListening: a config error found after the flags
// (here: a bad token kind) leaves the requested ports unbound.
func TestConfigErrorBeforeListening(t *testing.T) {
	grpcAddr, httpAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  enabled: true\n  tokens:\n    - {name: a, sha256: "+sha256Hex("x")+", kind: nobody, subject: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := testkit.Run(t, nil, "serve", "--config", cfg, "--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--data-dir", t.TempDir()); r.Code != 2 {
		t.Fatalf("exit %d, want 2; stderr %q", r.Code, r.Stderr)
	}
	for _, a := range []string{grpcAddr, httpAddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s still bound after a config error: %v", a, err)
			continue
		}
		l.Close()
	}
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
