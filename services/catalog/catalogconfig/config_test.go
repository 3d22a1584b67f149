package catalogconfig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const sample = `{
  "mcpServers": {
    "zeta": {"command": "npx", "args": ["-y", "@x/server"], "env": {"API_TOKEN": "${TOKEN}"}, "oauth": {"client_secret": "s3", "enabled": true}},
    "alpha": {"transport": "streamable-http", "url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
              "routing": {"mode": "prefer", "priority": 150, "keywords": ["pdf", " "]},
              "tools": {"read": {"routing": {"priority": 7}}}},
    "legacy": {"url": "http://h/sse", "enabled": false},
    "cat": {"type": "static", "path": "tools.jsonl"}
  },
  "skills": {"a": {"enabled": true}},
  "middlewares": ["x.y"]
}`

func TestParseOrderTypesAndRoundTrip(t *testing.T) {
	f, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	var names, types []string
	for _, s := range f.Servers {
		names = append(names, s.Name)
		types = append(types, s.EffectiveType())
	}
	if !reflect.DeepEqual(names, []string{"zeta", "alpha", "legacy", "cat"}) {
		t.Fatalf("order %v", names)
	}
	if !reflect.DeepEqual(types, []string{"stdio", "http", "sse", "static"}) {
		t.Fatalf("types %v", types)
	}
	if f.Servers[2].IsEnabled() || !f.Servers[0].IsEnabled() {
		t.Fatal("enabled")
	}
	if f.Servers[3].Prefixed() || !f.Servers[0].Prefixed() {
		t.Fatal("prefix defaults")
	}
	r := f.Servers[1].ResolveRouting("read")
	if r.Mode != "prefer" || r.Priority != 7 || !reflect.DeepEqual(r.Keywords, []string{"pdf"}) {
		t.Fatalf("routing %+v", r)
	}
	if r := f.Servers[1].ResolveRouting("other"); r.Priority != 100 {
		t.Fatalf("clamp %+v", r)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Servers {
		if !f.Servers[i].Equal(&g.Servers[i]) {
			t.Fatalf("server %d changed: %s", i, out)
		}
	}
	if len(g.Extra) != 2 || g.Extra[0].Key != "skills" || !strings.Contains(string(out), `"${TOKEN}"`) || !strings.Contains(string(out), `"oauth"`) {
		t.Fatalf("extra keys or placeholders lost: %s", out)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"mcpServers": {"a": {"routing": {"mode": "prefer", "bogus": 1}}}}`, "mcpServers.a.routing"},
		{`{"mcpServers": {"a": {"args": "x"}}}`, "mcpServers.a"},
		{`{"mcpServers": []}`, "mcpServers"},
		{`[1]`, "extensions config"},
	} {
		if _, err := Parse([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.in, err, c.want)
		}
	}
	f, _ := Parse([]byte(`{"mcpServers": {"a": {"type": "http"}, "b": {"session_scope": "global", "command": "x"}, "c": {"type": "ws", "url": "x"}}}`))
	for i, want := range []string{"mcpServers.a.url", "mcpServers.b.session_scope", "mcpServers.c.type"} {
		if err := f.Servers[i].Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate %d: %v", i, err)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "abc", "HOST": "h", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"Bearer ${TOKEN}":        "Bearer abc",
		"$TOKEN":                 "abc",
		"http://$HOST:80/$TOKEN": "http://h:80/abc",
		"cost $$5 and $5":        "cost $5 and $5",
		"x${EMPTY}y":             "xy",
		"${1-not-a-var}":         "${1-not-a-var}",
		"${not-a-var}":           "a-var", // POSIX ${VAR-default}: `not` is unset
		"trailing $":             "trailing $",
	} {
		got, err := ExpandString(in, lookup)
		if err != nil || got != want {
			t.Errorf("%q -> %q, %v; want %q", in, got, err, want)
		}
	}
	s := Server{Name: "gh", URL: "http://x", Headers: map[string]string{"Authorization": "Bearer ${NOPE}"}}
	_, err := Expand(s, lookup)
	var me *MissingVarError
	if !errors.As(err, &me) || me.Var != "NOPE" || me.Field != "headers.Authorization" || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("missing var error: %v", err)
	}
	s.Headers["Authorization"] = "Bearer ${TOKEN}"
	got, err := Expand(s, lookup)
	if err != nil || got.Headers["Authorization"] != "Bearer abc" || s.Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Fatalf("expand %v %v (original must keep the placeholder)", got.Headers, err)
	}
}

func TestMaskAndMerge(t *testing.T) {
	f, _ := Parse([]byte(sample))
	m := Masked(f.Servers[0])
	if m.Env["API_TOKEN"] != Mask || f.Servers[0].Env["API_TOKEN"] != "${TOKEN}" {
		t.Fatal("env not masked or original modified")
	}
	b, _ := m.marshal()
	if strings.Contains(string(b), "s3") || !strings.Contains(string(b), `"enabled":true`) {
		t.Fatalf("extra secret not masked: %s", b)
	}
	merged, err := MergeMasked(m, &f.Servers[0])
	if err != nil || !merged.Equal(&f.Servers[0]) {
		t.Fatalf("merge: %v", err)
	}
	m.Env["NEW"] = Mask
	if _, err := MergeMasked(m, &f.Servers[0]); err == nil || !strings.Contains(err.Error(), "mcpServers.zeta.env.NEW") {
		t.Fatalf("mask without stored value: %v", err)
	}
	if !IsSecretKey("X-Api-Key") || !IsSecretKey("Authorization") || IsSecretKey("region") {
		t.Fatal("IsSecretKey")
	}
}

func TestValidateCommand(t *testing.T) {
	ok := Server{Name: "s", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Env: map[string]string{"MEMORY_FILE_PATH": "/tmp/m"}}
	if err := ValidateCommand(&ok, DefaultCommandAllowlist); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Server
		want string
	}{
		{Server{Name: "s", Command: "/usr/bin/node"}, "mcpServers.s.command"},
		{Server{Name: "s", Command: "bash"}, "allowlist"},
		{Server{Name: "s", Command: "node;rm"}, "metacharacters"},
		{Server{Name: "s", Command: "node", Args: []string{"-e", "x"}}, "mcpServers.s.args[0]"},
		{Server{Name: "s", Command: "node", Args: []string{"a.js", "--eval=1"}}, "mcpServers.s.args[1]"},
		{Server{Name: "s", Command: "node", Args: []string{"-pe", "1"}}, "args[0]"},
		{Server{Name: "s", Command: "python3", Args: []string{"-c", "1"}}, "args[0]"},
		{Server{Name: "s", Command: "npx", Args: []string{"--call", "sh"}}, "args[0]"},
		{Server{Name: "s", Command: "node", Env: map[string]string{"NODE_OPTIONS": "--require x"}}, "mcpServers.s.env.NODE_OPTIONS"},
		{Server{Name: "s", Command: "node", Env: map[string]string{"ld_preload": "x"}}, "env.ld_preload"},
		{Server{Name: "s", Command: "npx", Env: map[string]string{"npm_config_node_options": "x"}}, "env.npm_config_node_options"},
	} {
		if err := ValidateCommand(&c.s, DefaultCommandAllowlist); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
}

func TestStaticAndAtomicWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.jsonl")
	os.WriteFile(p, []byte(`{"name":"a","description":"d","input_schema":null,"server":"s1"}`+"\n\n"+`{"name":"b","description":"","input_schema":{"type":"object"}}`+"\n"), 0o600)
	rows, err := LoadStatic(p, "def")
	if err != nil || len(rows) != 2 || rows[0].InputSchema != nil || rows[1].Server != "def" || string(rows[1].InputSchema) != `{"type":"object"}` {
		t.Fatalf("%+v %v", rows, err)
	}
	os.WriteFile(p, []byte(`{"description":"x"}`), 0o600)
	if _, err := LoadStatic(p, "d"); err == nil || !strings.Contains(err.Error(), ":1: name") {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ext.json")
	if err := WriteAtomic(cfg, []byte(sample)); err != nil {
		t.Fatal(err)
	}
	f, raw, err := Load(cfg)
	if err != nil || len(f.Servers) != 4 || string(raw) != sample {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("temp files left: %v", ents)
	}
	var v any
	out, _ := f.Marshal()
	if json.Unmarshal(out, &v) != nil {
		t.Fatal("invalid json")
	}
}

func TestSessionInitTimeoutNull(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "session_init_timeout": null}, "b": {"command": "x"}, "c": {"command": "x", "session_init_timeout": 5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Servers[0].InitTimeout() != 0 || f.Servers[1].InitTimeout() != DefaultSessionInitTimeout || f.Servers[2].InitTimeout() != 5*time.Second {
		t.Fatalf("%v %v %v", f.Servers[0].InitTimeout(), f.Servers[1].InitTimeout(), f.Servers[2].InitTimeout())
	}
}

func TestTenantsKey(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {"s": {"command": "npx", "tenants": ["acme", "beta.eu"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Servers[0]
	if err := s.Validate(); err != nil || !s.VisibleTo("acme") || s.VisibleTo("gamma") || s.OwnedBy("acme") || s.NameScope() != "*" {
		t.Fatalf("tenants [acme beta.eu]: %v visible(acme)=%v visible(gamma)=%v owned=%v scope=%q", err, s.VisibleTo("acme"), s.VisibleTo("gamma"), s.OwnedBy("acme"), s.NameScope())
	}
	one := Server{Name: "o", Command: "npx", Tenants: []string{"acme"}}
	if !one.OwnedBy("acme") || one.NameScope() != "acme" {
		t.Fatal("a server of one tenant is owned by it and named in its scope")
	}
	all := Server{Name: "a", Command: "npx"}
	if !all.VisibleTo("anyone") || all.OwnedBy("anyone") || all.NameScope() != "*" {
		t.Fatal("a server without tenants is every tenant's, owned by none")
	}
	for _, bad := range []string{`["*"]`, `[""]`, `["a b"]`, `["acme", "acme"]`, `["` + strings.Repeat("x", 65) + `"]`} {
		f, err := Parse([]byte(`{"mcpServers": {"s": {"command": "npx", "tenants": ` + bad + `}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Servers[0].Validate(); err == nil || !strings.Contains(err.Error(), "mcpServers.s.tenants[") {
			t.Errorf("tenants %s: %v, want an error naming the entry", bad, err)
		}
	}
	// Written back unchanged.
	out, err := f.Marshal()
	if err != nil || !strings.Contains(string(out), `"tenants"`) {
		t.Fatalf("marshal: %s %v", out, err)
	}
}

func TestWorkingDirThread(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {
		"ok": {"command": "node", "session_scope": "per_thread", "working_dir": "thread"},
		"shared": {"command": "node", "working_dir": "thread"},
		"http": {"type": "http", "url": "https://x.example/mcp", "session_scope": "per_thread", "working_dir": "thread"},
		"cwd": {"command": "node", "session_scope": "per_thread", "working_dir": "thread", "cwd": "/tmp"},
		"other": {"command": "node", "session_scope": "per_thread", "working_dir": "/srv"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ok": "", "shared": "requires session_scope per_thread", "http": "only stdio servers",
		"cwd": "cannot be combined with cwd", "other": `"/srv" is not supported`}
	for _, s := range f.Servers {
		err := s.Validate()
		if w := want[s.Name]; w == "" {
			if err != nil || s.WorkingDir != WorkingDirThread {
				t.Errorf("%s: %v (working_dir %q)", s.Name, err, s.WorkingDir)
			}
		} else if err == nil || !strings.Contains(err.Error(), "mcpServers."+s.Name+".working_dir: ") || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: err %v, want mcpServers.%s.working_dir ... %s", s.Name, err, s.Name, w)
		}
	}
}

// stateful is a known key (no warning, written back), allowed on stdio and
// http servers, refused on a static server naming the field; a non-boolean
// value is a parse error.
func TestStatefulKey(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {
		"files": {"command": "node", "args": ["s.js"], "stateful": true},
		"remote": {"type": "http", "url": "https://x.example/mcp", "stateful": true, "session_scope": "per_user"},
		"plain": {"command": "node"},
		"table": {"type": "static", "path": "t.jsonl", "stateful": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Servers {
		err := s.Validate()
		switch s.Name {
		case "files", "remote":
			if err != nil || !s.Stateful || len(s.Warnings()) != 0 {
				t.Errorf("%s: %v, stateful %v, warnings %v", s.Name, err, s.Stateful, s.Warnings())
			}
		case "plain":
			if err != nil || s.Stateful {
				t.Errorf("plain: %v, stateful %v", err, s.Stateful)
			}
		case "table":
			if err == nil || !strings.Contains(err.Error(), "mcpServers.table.stateful: ") {
				t.Errorf("static + stateful: %v, want an error naming mcpServers.table.stateful", err)
			}
		}
	}
	out, err := f.Marshal()
	if err != nil || strings.Count(string(out), `"stateful": true`) != 3 {
		t.Fatalf("written back: %s %v", out, err)
	}
	if _, err := Parse([]byte(`{"mcpServers": {"x": {"command": "node", "stateful": "yes"}}}`)); err == nil {
		t.Fatal(`"stateful": "yes" was accepted`)
	}
}
