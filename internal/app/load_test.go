package app_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
)

func writeYAML(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "toolplane.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func ptr(s string) *string { return &s }

// TestEnvOverFileFlagOverEnv: for every kind of key (address, duration,
// list, nested, a service section) the environment beats the file and a
// flag beats the environment; untouched keys keep file values or defaults.
func TestEnvOverFileFlagOverEnv(t *testing.T) {
	file := writeYAML(t, `server:
  grpc_addr: 127.0.0.1:1111
  http_addr: 127.0.0.1:1112
  data_dir: /file/data
  shutdown_timeout: 7s
  drain_period: 2s
  services: [catalog, authz, skills, runtime]
  log:
    level: warn
runtime:
  upstream_timeout: 3s
`)
	env := []string{
		"TOOLPLANE_SERVER_GRPC_ADDR=127.0.0.1:2221",
		"TOOLPLANE_SERVER_DATA_DIR=/env/data",
		"TOOLPLANE_SERVER_SHUTDOWN_TIMEOUT=9s",
		"TOOLPLANE_SERVER_SERVICES=catalog, authz",
		"TOOLPLANE_SERVER_LOG_LEVEL=debug",
		"TOOLPLANE_RUNTIME_UPSTREAMS_CATALOG_ADDRESS=127.0.0.1:9999",
		"TOOLPLANE_TOKEN=not-a-config-key",
		"NOT_TOOLPLANE_SERVER_GRPC_ADDR=127.0.0.1:1",
	}

	c, err := app.LoadConfig(config.Flags{ConfigFile: file}, env)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if s.GRPCAddr != "127.0.0.1:2221" || s.DataDir != "/env/data" || s.ShutdownTimeout != 9*time.Second || s.Log.Level != "debug" {
		t.Errorf("env over file: grpc %s, data %s, shutdown %s, level %s", s.GRPCAddr, s.DataDir, s.ShutdownTimeout, s.Log.Level)
	}
	if !slices.Equal(s.Services, []string{"catalog", "authz"}) {
		t.Errorf("env list: services %q", s.Services)
	}
	if c.Runtime.Upstreams.Catalog.Address != "127.0.0.1:9999" {
		t.Errorf("env nested service key: %q", c.Runtime.Upstreams.Catalog.Address)
	}
	if s.HTTPAddr != "127.0.0.1:1112" || s.DrainPeriod != 2*time.Second || c.Runtime.UpstreamTimeout != 3*time.Second {
		t.Errorf("file values lost: http %s, drain %s, upstream timeout %s", s.HTTPAddr, s.DrainPeriod, c.Runtime.UpstreamTimeout)
	}
	if s.MaxMessageBytes != 64<<20 || s.Log.Format != "text" {
		t.Errorf("defaults lost: max %d, format %s", s.MaxMessageBytes, s.Log.Format)
	}

	c, err = app.LoadConfig(config.Flags{ConfigFile: file, GRPCAddr: ptr("127.0.0.1:3331"), DataDir: ptr("/flag/data"), Services: ptr("skills")}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.GRPCAddr != "127.0.0.1:3331" || c.Server.DataDir != "/flag/data" || !slices.Equal(c.Server.Services, []string{"skills"}) {
		t.Errorf("flag over env: grpc %s, data %s, services %q", c.Server.GRPCAddr, c.Server.DataDir, c.Server.Services)
	}

	// No file, no env, no flags: the defaults.
	c, err = app.LoadConfig(config.Flags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.GRPCAddr != "127.0.0.1:7420" || c.Server.HTTPAddr != "127.0.0.1:7421" || c.Server.DataDir != "./data" ||
		!slices.Equal(c.Server.Services, app.AllServices) || c.Auth.Enabled {
		t.Errorf("defaults: %+v", c.Server)
	}
}

// TestEveryLeafSettableFromEnv: each scalar key's variable is
// TOOLPLANE_<PATH> and is unique (two keys never share a variable).
func TestEveryLeafSettableFromEnv(t *testing.T) {
	c := app.DefaultConfig()
	seen := map[string]string{}
	for _, l := range config.Leaves(&c) {
		want := "TOOLPLANE_" + strings.ToUpper(strings.ReplaceAll(l.Path, ".", "_"))
		if l.Env != want {
			t.Errorf("%s: env %s, want %s", l.Path, l.Env, want)
		}
		if other, dup := seen[l.Env]; dup {
			t.Errorf("%s and %s share the variable %s", l.Path, other, l.Env)
		}
		seen[l.Env] = l.Path
	}
	if len(seen) < 20 {
		t.Errorf("only %d leaves", len(seen))
	}
}

// TestConfigErrorsNameKey: the *config.Error of each bad input names the key,
// variable or flag.
func TestConfigErrorsNameKey(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		env   []string
		flags config.Flags
		key   string
		in    string // substring of the reason
	}{
		{name: "bad env duration", env: []string{"TOOLPLANE_SERVER_SHUTDOWN_TIMEOUT=soon"}, key: "TOOLPLANE_SERVER_SHUTDOWN_TIMEOUT", in: "soon"},
		{name: "bad env bool", env: []string{"TOOLPLANE_AUTH_ENABLED=perhaps"}, key: "TOOLPLANE_AUTH_ENABLED", in: "perhaps"},
		{name: "bad env int", env: []string{"TOOLPLANE_SERVER_MAX_MESSAGE_BYTES=big"}, key: "TOOLPLANE_SERVER_MAX_MESSAGE_BYTES", in: "big"},
		{name: "bad flag address", flags: config.Flags{GRPCAddr: ptr("nonsense")}, key: "--grpc-addr", in: "malformed"},
		{name: "bad flag port", flags: config.Flags{HTTPAddr: ptr("127.0.0.1:70000")}, key: "--http-addr", in: "0..65535"},
		{name: "same address twice", flags: config.Flags{GRPCAddr: ptr("127.0.0.1:5000"), HTTPAddr: ptr("127.0.0.1:5000")}, key: "server.http_addr", in: "differ"},
		{name: "non-loopback env address", env: []string{"TOOLPLANE_SERVER_GRPC_ADDR=0.0.0.0:7420"}, key: "server.grpc_addr", in: "non-loopback"},
		{name: "non-loopback allowed with auth", env: []string{"TOOLPLANE_SERVER_GRPC_ADDR=0.0.0.0:7420", "TOOLPLANE_AUTH_ENABLED=true"}, key: ""},
		{name: "empty services", flags: config.Flags{Services: ptr(" , ")}, key: "server.services"},
		{name: "duplicate service", flags: config.Flags{Services: ptr("catalog,catalog")}, key: "server.services", in: "twice"},
		{name: "missing config file", flags: config.Flags{ConfigFile: "/nonexistent/toolplane.yaml"}, key: "--config"},
		{name: "both JWT keys", yaml: "auth:\n  jwt:\n    hmac_secret_file: a\n    public_key_file: b\n", key: "auth.jwt"},
		{name: "duplicate token name", yaml: "auth:\n  tokens:\n    - {name: a, sha256: " + strings.Repeat("a", 64) + ", kind: user, subject: a}\n    - {name: a, sha256: " + strings.Repeat("b", 64) + ", kind: user, subject: b}\n", key: "auth.tokens[1].name"},
		{name: "token without subject", yaml: "auth:\n  tokens:\n    - {name: a, sha256: " + strings.Repeat("a", 64) + ", kind: service}\n", key: "auth.tokens[0].subject"},
		{name: "uppercase hash", yaml: "auth:\n  tokens:\n    - {name: a, sha256: " + strings.Repeat("A", 64) + ", kind: user, subject: a}\n", key: "auth.tokens[0].sha256"},
		{name: "client CA without cert", yaml: "server:\n  tls:\n    client_ca_file: ca.pem\n", key: "server.tls.client_ca_file"},
		{name: "upstream TLS half", yaml: "runtime:\n  upstreams:\n    authz:\n      tls: {enabled: true, cert_file: c.pem}\n", key: "runtime.upstreams.authz.tls"},
		{name: "split auth with nobody", yaml: "auth:\n  enabled: true\n", flags: config.Flags{Services: ptr("catalog")}, key: "auth", in: "nobody"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.flags
			if tc.yaml != "" {
				f.ConfigFile = writeYAML(t, tc.yaml)
			}
			_, err := app.LoadConfig(f, tc.env)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *config.Error naming %s", err, err, tc.key)
			}
			if ce.Key != tc.key || !strings.Contains(ce.Reason, tc.in) {
				t.Errorf("err = %q; want key %s and a reason containing %q", err, tc.key, tc.in)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestUnknownKeyPaths: an unknown key anywhere is reported with its full
// path (sections, nested structs, list items, map entries) and its line.
func TestUnknownKeyPaths(t *testing.T) {
	cases := []struct {
		yaml, key, line string
	}{
		{"bogus: 1\n", "bogus", "line 1"},
		{"server:\n  bogus: 1\n", "server.bogus", "line 2"},
		{"server:\n  tls:\n    cert_file: a\n    cert: b\n", "server.tls.cert", "line 4"},
		{"server:\n  log:\n    colour: red\n", "server.log.colour", "line 3"},
		{"auth:\n  tokens:\n    - name: a\n    - name: b\n      bogus: 1\n", "auth.tokens[1].bogus", "line 5"},
		{"auth:\n  jwt:\n    secret: x\n", "auth.jwt.secret", "line 3"},
		{"runtime:\n  upstreams:\n    catalog:\n      tls:\n        insecure: true\n", "runtime.upstreams.catalog.tls.insecure", "line 5"},
		{"runtime:\n  upstreams:\n    billing: {address: x}\n", "runtime.upstreams.billing", "line 3"},
		{"catalog:\n  bogus: 1\n", "catalog.bogus", "line 2"},
		{"authz:\n  bogus: 1\n", "authz.bogus", "line 2"},
		{"skills:\n  bogus: 1\n", "skills.bogus", "line 2"},
		{"runtime:\n  bogus: 1\n", "runtime.bogus", "line 2"},
	}
	for _, tc := range cases {
		var c app.Config
		err := config.Decode([]byte(tc.yaml), &c)
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Errorf("%q: err = %v, want *config.Error", tc.yaml, err)
			continue
		}
		if ce.Key != tc.key || !strings.Contains(ce.Reason, "unknown key") || !strings.Contains(ce.Reason, tc.line) {
			t.Errorf("%q: err = %q; want key %s, `unknown key` and %s", tc.yaml, err, tc.key, tc.line)
		}
	}
	// Through Load, the same error reaches the caller unchanged.
	_, err := app.LoadConfig(config.Flags{ConfigFile: writeYAML(t, "server:\n  grpc_addr: 127.0.0.1:1\n  bogus: true\n")}, nil)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "server.bogus" {
		t.Errorf("Load: err = %v, want key server.bogus", err)
	}
	// A known key of the wrong type names the key and the line.
	for _, tc := range []struct{ yaml, key string }{
		{"server:\n  max_message_bytes: lots\n", "server.max_message_bytes"},
		{"server:\n  grpc_addr: 127.0.0.1:1\n  shutdown_timeout: [1, 2]\n", "server.shutdown_timeout"},
		{"auth:\n  enabled: maybe\n", "auth.enabled"},
		{"auth:\n  tokens:\n    - name: a\n      roles: admin\n", "auth.tokens[0].roles"},
		{"server:\n  services: [catalog, [authz]]\n", "server.services"},
		{"server:\n  services:\n    - catalog\n    - [authz]\n", "server.services[1]"},
	} {
		var c app.Config
		err := config.Decode([]byte(tc.yaml), &c)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Reason, "line") {
			t.Errorf("%q: err = %v; want key %s and the line", tc.yaml, err, tc.key)
		}
	}
}

// TestExtensionsConfigFlag: --extensions-config sets
// catalog.extensions_config over the file and the environment, and the file
// it names must exist (the error names the flag).
func TestExtensionsConfigFlag(t *testing.T) {
	file := writeYAML(t, "catalog:\n  extensions_config: /from/file.json\n")
	env := []string{"TOOLPLANE_CATALOG_EXTENSIONS_CONFIG=/from/env.json"}
	ext := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(ext, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := app.LoadConfig(config.Flags{ConfigFile: file, Keys: []config.KeyFlag{app.ExtensionsConfigFlag(ext)}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Catalog.ExtensionsConfig != ext {
		t.Errorf("catalog.extensions_config = %q, want the flag's %q", c.Catalog.ExtensionsConfig, ext)
	}
	c, err = app.LoadConfig(config.Flags{ConfigFile: file}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Catalog.ExtensionsConfig != "/from/env.json" {
		t.Errorf("without the flag: catalog.extensions_config = %q, want the environment's", c.Catalog.ExtensionsConfig)
	}
	_, err = app.LoadConfig(config.Flags{Keys: []config.KeyFlag{app.ExtensionsConfigFlag("/nonexistent/extensions_config.json")}}, nil)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "--extensions-config" || ce.Reason != "no such file or directory" {
		t.Errorf("missing file: err = %v, want --extensions-config: no such file or directory", err)
	}
}
