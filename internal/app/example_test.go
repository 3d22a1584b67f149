package app_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
)

// TestExampleMatchesDefaults keeps toolplane.example.yaml equal to the code's
// defaults: decoding it (without defaults applied) must give
// app.DefaultConfig(), and every scalar key of every registered section must
// be written out in the file. A failure names the package owning the key.
func TestExampleMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "toolplane.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got app.Config
	if err := config.Decode(data, &got); err != nil {
		t.Fatalf("example does not decode: %v", err)
	}
	want := app.DefaultConfig()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{"server": "internal/config", "auth": "internal/config"}
	for _, s := range want.Sections() {
		owner[s.SectionKey()] = strings.TrimPrefix(reflect.TypeOf(s).Elem().PkgPath(), "github.com/toolplane/toolplane/")
	}
	for _, l := range config.Leaves(&want) {
		if !hasPath(root.Content[0], strings.Split(l.Path, ".")) {
			section, _, _ := strings.Cut(l.Path, ".")
			t.Errorf("toolplane.example.yaml does not document %s (section %s, owned by %s)", l.Path, section, owner[section])
		}
	}
	gl := map[string]any{}
	for _, l := range config.Leaves(&got) {
		gl[l.Path] = l.Value.Interface()
	}
	for _, l := range config.Leaves(&want) {
		if g, ok := gl[l.Path]; ok && !reflect.DeepEqual(normal(g), normal(l.Value.Interface())) {
			t.Errorf("%s: example has %v, code default is %v", l.Path, g, l.Value.Interface())
		}
	}
}

func normal(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice && rv.Len() == 0 {
		return nil
	}
	return v
}

func hasPath(n *yaml.Node, path []string) bool {
	if len(path) == 0 {
		return true
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == path[0] {
			return hasPath(n.Content[i+1], path[1:])
		}
	}
	return false
}

func TestUnknownKeyNamesPath(t *testing.T) {
	var c app.Config
	err := config.Decode([]byte("server:\n  grpc_addr: 127.0.0.1:1\n  bogus: 1\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "server.bogus") || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v; want it to name server.bogus and line 3", err)
	}
	err = config.Decode([]byte("auth:\n  tokens:\n    - name: a\n      shaa: x\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "auth.tokens[0].shaa") {
		t.Fatalf("err = %v; want auth.tokens[0].shaa", err)
	}
}

func TestPrecedenceFlagsEnvFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(file, []byte("server:\n  grpc_addr: 127.0.0.1:1111\n  http_addr: 127.0.0.1:2222\n  data_dir: /from/file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TOOLPLANE_SERVER_HTTP_ADDR=127.0.0.1:3333", "TOOLPLANE_SERVER_DATA_DIR=/from/env", "TOOLPLANE_TOKEN=ignored"}
	flag := "/from/flag"
	c, err := app.LoadConfig(config.Flags{ConfigFile: file, DataDir: &flag}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.GRPCAddr != "127.0.0.1:1111" || c.Server.HTTPAddr != "127.0.0.1:3333" || c.Server.DataDir != "/from/flag" {
		t.Fatalf("got grpc=%s http=%s data=%s", c.Server.GRPCAddr, c.Server.HTTPAddr, c.Server.DataDir)
	}
	if c.Server.MaxMessageBytes != 64<<20 {
		t.Fatalf("default not applied: %d", c.Server.MaxMessageBytes)
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		yaml, key string
	}{
		{"server:\n  grpc_addr: nonsense\n", "server.grpc_addr"},
		{"server:\n  grpc_addr: 0.0.0.0:7420\n", "server.grpc_addr"},
		{"server:\n  services: [catalog, nope]\n", "server.services"},
		{"server:\n  services: [runtime]\n", "runtime.upstreams.catalog.address"},
		{"auth:\n  enabled: true\n  tokens:\n    - {name: a, sha256: abc, kind: user, subject: a}\n", "auth.tokens[0].sha256"},
		{"auth:\n  tokens:\n    - {name: a, sha256: " + strings.Repeat("a", 64) + ", kind: root, subject: a}\n", "auth.tokens[0].kind"},
		{"server:\n  log:\n    level: loud\n", "server.log.level"},
		{"server:\n  tls:\n    cert_file: x\n", "server.tls"},
	}
	for _, tc := range cases {
		var c app.Config
		if err := config.Decode([]byte(tc.yaml), &c); err != nil {
			t.Fatalf("%q: decode: %v", tc.yaml, err)
		}
		c.SetDefaults()
		err := c.Validate()
		ce, ok := err.(*config.Error)
		if !ok || ce.Key != tc.key {
			t.Errorf("%q: err = %v; want key %s", tc.yaml, err, tc.key)
		}
	}
}
