package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/runtime"
)

// runImport runs `config import-deerflow args...` and returns stdout and stderr.
func runImport(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newConfigCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"import-deerflow"}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// loadWritten loads a written toolplane.yaml exactly as `toolplane serve
// --config` does (no environment).
func loadWritten(t *testing.T, path string) *app.Config {
	t.Helper()
	cfg, err := app.LoadConfig(config.Flags{ConfigFile: path}, nil)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	return cfg
}

// reportLines are the "not carried over" lines of the stderr report.
func reportLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if p, ok := strings.CutPrefix(l, "not carried over: "); ok {
			out = append(out, p)
		}
	}
	return out
}

func TestImportDeerFlowFull(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "toolplane.yaml")
	src := filepath.Join("testdata", "deerflow", "full")
	stdout, stderr, err := runImport(t, filepath.Join(src, "config.yaml"), filepath.Join(src, "extensions_config.json"), "-o", out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "" {
		t.Fatalf("stdout %q: with -o the file is the only output", stdout)
	}
	t.Logf("report:\n%s", stderr)
	cfg := loadWritten(t, out)

	// Tools: web_fetch (DeerFlow's jina_ai provider becomes web.fetch, its
	// timeout runtime.web.fetch.timeout) and the seven sandbox tools, in
	// file order; web_search and image_search reported.
	want := []runtime.ToolConfig{
		{Name: "web_fetch", Group: "web", Use: "web.fetch"},
		{Name: "ls", Group: "file:read", Use: "file.ls"},
		{Name: "read_file", Group: "file:read", Use: "file.read"},
		{Name: "glob", Group: "file:read", Use: "file.glob"},
		{Name: "grep", Group: "file:read", Use: "file.grep"},
		{Name: "write_file", Group: "file:write", Use: "file.write"},
		{Name: "str_replace", Group: "file:write", Use: "file.str_replace"},
		{Name: "bash", Group: "bash", Use: "bash"},
	}
	if !slices.Equal(cfg.Runtime.Tools, want) {
		t.Fatalf("runtime.tools = %+v, want %+v", cfg.Runtime.Tools, want)
	}
	if cfg.Runtime.Web.Fetch.Timeout != 10*time.Second {
		t.Fatalf("runtime.web.fetch.timeout = %v, want DeerFlow's 10 s", cfg.Runtime.Web.Fetch.Timeout)
	}
	// glob and grep set DeerFlow's max_results, which are Toolplane's caps.
	if strings.Contains(stderr, "tools[5]") || strings.Contains(stderr, "tools[6]") {
		t.Fatalf("glob/grep reported although carried over:\n%s", stderr)
	}
	var groups []string
	for _, g := range cfg.Runtime.ToolGroups {
		groups = append(groups, g.Name)
	}
	if !slices.Equal(groups, []string{"web", "file:read", "file:write", "bash", "browser"}) {
		t.Fatalf("tool_groups = %v", groups)
	}
	ts := cfg.Runtime.ToolSearch
	if ts.Enabled == nil || !*ts.Enabled || ts.AutoPromoteTopK != 3 {
		t.Fatalf("tool_search = %+v, want enabled with top_k 3", ts)
	}
	if !cfg.Runtime.AllowBash {
		t.Fatal("allow_bash: local sandbox with allow_host_bash: true must enable bash")
	}
	if to := cfg.Runtime.ToolOutput; to.ExternalizeMinChars != 16000 || !slices.Equal(to.ExemptTools, []string{"read_file", "read_file_tool"}) {
		t.Fatalf("tool_output = %+v", to)
	}
	if cfg.Server.Log.Level != "warn" || cfg.Skills.ContainerPath != "/mnt/skills" {
		t.Fatalf("log level %q, container path %q", cfg.Server.Log.Level, cfg.Skills.ContainerPath)
	}
	ext, _ := filepath.Abs(filepath.Join(src, "extensions_config.json"))
	if cfg.Catalog.ExtensionsConfig != ext {
		t.Fatalf("catalog.extensions_config = %q, want the absolute source path %q", cfg.Catalog.ExtensionsConfig, ext)
	}
	// Models: OpenAI-compatible, key from the environment, never the key.
	lm := cfg.Runtime.Loop.Models
	if len(lm) != 2 || lm[0].Name != "gpt-4o" || lm[0].APIKeyEnv != "OPENAI_API_KEY" || lm[0].BaseURL != "https://api.openai.com/v1" || lm[0].MaxTokens != 4096 {
		t.Fatalf("runtime.loop.models = %+v", lm)
	}
	if !lm[0].SupportsVision || lm[1].SupportsVision {
		t.Fatalf("supports_vision not carried over: gpt-4o %v, gpt-4o-mini %v (want true, false)", lm[0].SupportsVision, lm[1].SupportsVision)
	}
	if ld := cfg.Runtime.Loop.LoopDetection; ld.WarnThreshold != 3 || ld.HardLimit != 5 {
		t.Fatalf("loop_detection = %+v", ld)
	}

	// Authorization: the roles as DeerFlow wrote them, routes dropped; the
	// translation enforces DeerFlow's semantics.
	roles, _ := cfg.Authz.Authorization["roles"].(map[string]any)
	if len(roles) != 3 {
		t.Fatalf("authz.authorization.roles = %v, want admin, user, guest", cfg.Authz.Authorization)
	}
	for name, pol := range roles {
		if _, ok := pol.(map[string]any)["routes"]; ok {
			t.Fatalf("role %s kept routes", name)
		}
	}
	rules, _, err := authzcasbin.TranslateDeerFlow(cfg.Authz.Authorization, "authz.authorization")
	if err != nil {
		t.Fatal(err)
	}
	has := func(subject, resource, target, effect string) bool {
		return slices.ContainsFunc(rules, func(r authzcasbin.Rule) bool {
			return r.Subject == subject && r.Resource == resource && r.Target == target && r.Effect == effect
		})
	}
	for _, c := range []struct {
		subject, resource, target, effect string
		want                              bool
	}{
		{"guest", "tool", "web_search", "allow", true},
		{"guest", "tool", "*", "allow", false},
		{"guest", "skill", "*", "allow", false}, // skills: {allow: false}
		{"guest", "mcp_server", "*", "allow", true},
		{"user", "tool", "bash", "deny", true},
		{"user", "mcp_server", "github", "deny", true},
		{"admin", "skill", "*", "allow", true}, // no policy = unrestricted
	} {
		if got := has(c.subject, c.resource, c.target, c.effect); got != c.want {
			t.Errorf("rule p, %s, *, %s, %s, *, %s present = %v, want %v", c.subject, c.resource, c.target, c.effect, got, c.want)
		}
	}

	// The report: every key not carried over, one line each, with its path.
	lines := reportLines(stderr)
	for _, want := range []string{
		"config_version:",
		"tools[0] (web_search): use \"deerflow.community.ddg_search.tools:web_search_tool\"",
		"tools[2] (image_search):",
		"models[0] (gpt-4o).display_name:",
		"tool_output.fallback_max_chars:",
		"tool_output.storage_subdir:",
		"subagents.timeout_seconds:",
		"skills.path:",
		"authorization.default_role:",
		"authorization.provider.config.roles.admin.routes:",
		"authorization.provider.config.roles.user.routes:",
		"authorization.provider.config.roles.guest.routes:",
		"sandbox.bash_output_max_chars:",
		"extensions_config.json: skills.ppt-generation:",
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("report lacks a line starting %q", want)
		}
	}
	// Nothing carried over is reported, and no line repeats.
	for _, l := range lines {
		for _, carried := range []string{"tools[1]", "tools[3]", "tools[4]", "tools[7]", "tools[8]", "tools[9]", "tool_search", "tool_groups", "models[0] (gpt-4o).supports_vision", "log_level", "sandbox.allow_host_bash", "skills.container_path", "skills.deferred_discovery",
			"extensions_config.json: mcpServers.notion.oauth"} { // the catalog reads the oauth block
			if strings.HasPrefix(l, carried) {
				t.Errorf("carried key reported: %s", l)
			}
		}
	}
	if c := slices.Compact(slices.Clone(lines)); len(c) != len(lines) {
		t.Errorf("repeated report lines: %v", lines)
	}
	// Every top-level DeerFlow key is carried over or reported.
	var top map[string]any
	data, _ := os.ReadFile(filepath.Join(src, "config.yaml"))
	if err := yaml.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	carried := []string{"tools", "tool_groups", "tool_search", "tool_output", "skills", "authorization", "sandbox", "log_level", "models", "loop_detection", "subagents", "token_budget", "skill_evolution"}
	for k := range top {
		if !slices.Contains(carried, k) && !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, k+":") }) {
			t.Errorf("top-level key %q neither carried over nor reported", k)
		}
	}
	// The file repeats the report as comments.
	written, _ := os.ReadFile(out)
	for _, l := range lines {
		if !strings.Contains(string(written), "#   "+l+"\n") {
			t.Errorf("the written file lacks the comment %q", l)
		}
	}
	// An existing file is not overwritten without --force.
	_, _, err = runImport(t, filepath.Join(src, "config.yaml"), "-o", out)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second import into the same file: err = %v, want exit 2 pointing at --force", err)
	}
	if _, _, err := runImport(t, filepath.Join(src, "config.yaml"), "-o", out, "--force"); err != nil {
		t.Fatalf("--force: %v", err)
	}
}

func TestImportDeerFlowMinimal(t *testing.T) {
	stdout, stderr, err := runImport(t, filepath.Join("testdata", "deerflow", "minimal", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "toolplane.yaml")
	if err := os.WriteFile(out, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadWritten(t, out)
	// No tool_search section: DeerFlow's default (off), not Toolplane's (on).
	if ts := cfg.Runtime.ToolSearch.Enabled; ts == nil || *ts {
		t.Fatal("tool_search: absent in DeerFlow must import as off")
	}
	if len(cfg.Runtime.Tools) != 4 || cfg.Runtime.Tools[1].Name != "read" || cfg.Runtime.Tools[1].Use != "file.read" || !cfg.Runtime.AllowBash {
		t.Fatalf("tools %+v, allow_bash %v", cfg.Runtime.Tools, cfg.Runtime.AllowBash)
	}
	// authorization.enabled false: DeerFlow does not enforce the roles.
	if cfg.Authz.Authorization != nil {
		t.Fatalf("authz.authorization = %v, want none (authorization disabled)", cfg.Authz.Authorization)
	}
	if len(cfg.Runtime.Loop.Models) != 0 {
		t.Fatalf("models %+v: a native Ollama model is not OpenAI-compatible", cfg.Runtime.Loop.Models)
	}
	if cfg.Catalog.ExtensionsConfig != "extensions_config.json" {
		t.Fatalf("catalog.extensions_config = %q, want the default (no file next to the config)", cfg.Catalog.ExtensionsConfig)
	}
	lines := reportLines(stderr)
	for _, want := range []string{"models[0] (qwen3-local):", "tools[1] (read).name:", "authorization.provider.config.roles: not imported", "extensions_config.json: not given"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("report lacks %q:\n%s", want, stderr)
		}
	}
}

func TestImportDeerFlowErrors(t *testing.T) {
	_, _, err := runImport(t, filepath.Join("testdata", "deerflow", "bad-authz", "config.yaml"))
	if err == nil || !strings.Contains(err.Error(), "authorization.provider.config.roles.guest.tools.allow") {
		t.Fatalf("err = %v, want the bad key named", err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, cfg, ext, want string }{
		{"missing file", "", "", "no such file"},
		{"not YAML", "tools: [", "", "yaml"},
		{"broken extensions file", "tools: []\n", `{"mcpServers": {"a": `, "extensions_config.json"},
		{"authorization without provider", "authorization: {enabled: true}\n", "", "authorization.provider: required"},
		{"routing typo", "tools: []\n", `{"mcpServers": {"a": {"command": "npx", "routing": {"mode": "prefer", "prio": 1}}}}`, "prio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{filepath.Join(dir, "absent.yaml")}
			if c.cfg != "" {
				args = []string{write("config.yaml", c.cfg)}
			}
			if c.ext != "" {
				args = append(args, write("extensions_config.json", c.ext))
			}
			_, _, err := runImport(t, args...)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want exit 2 mentioning %q", err, c.want)
			}
		})
	}
}

// TestImportDeerFlowFailClosedRoles: DeerFlow denies a role its policy does
// not define; the shipped Toolplane roles admin and user must not keep
// their default grants after the import.
func TestImportDeerFlowFailClosedRoles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	os.WriteFile(p, []byte(`
authorization:
  enabled: true
  fail_closed: false
  provider:
    use: deerflow.authz.rbac:RbacAuthorizationProvider
    config:
      roles:
        analyst:
          tools: {allow: [read_file]}
          sandbox: {allow: "*"}
          dashboards: {allow: "*"}
`), 0o600)
	stdout, stderr, err := runImport(t, p)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "toolplane.yaml")
	os.WriteFile(out, []byte(stdout), 0o600)
	cfg := loadWritten(t, out)
	rules, roles, err := authzcasbin.TranslateDeerFlow(cfg.Authz.Authorization, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(roles, []string{"admin", "analyst", "user"}) {
		t.Fatalf("roles %v, want admin and user defined next to analyst", roles)
	}
	for _, r := range rules {
		if (r.Subject == "admin" || r.Subject == "user") && r.Effect == authzcasbin.EffectAllow {
			t.Fatalf("undefined role %s is allowed %s %s", r.Subject, r.Resource, r.Target)
		}
	}
	if !cfg.Authz.FilterFailOpen || !cfg.Runtime.Authz.FailOpenListing {
		t.Fatal("fail_closed: false must open listing (and only listing)")
	}
	lines := reportLines(stderr)
	for _, want := range []string{"authorization.fail_closed:", "authorization.provider.config.roles.analyst.sandbox:", "authorization.provider.config.roles.analyst.dashboards:", "authorization.provider.config.roles.admin:", "authorization.provider.config.roles.user:"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("report lacks %q:\n%s", want, stderr)
		}
	}
}

// TestImportDeerFlowCustomProvider: an enforced policy that cannot be
// translated leaves the shipped roles with nothing allowed (fail closed),
// never with Toolplane's default grants.
func TestImportDeerFlowCustomProvider(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	os.WriteFile(p, []byte("authorization:\n  enabled: true\n  provider:\n    use: my_company.authz:OpaProvider\n    config: {url: http://opa:8181}\n"), 0o600)
	stdout, stderr, err := runImport(t, p)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "toolplane.yaml")
	os.WriteFile(out, []byte(stdout), 0o600)
	cfg := loadWritten(t, out)
	rules, roles, err := authzcasbin.TranslateDeerFlow(cfg.Authz.Authorization, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(roles, []string{"admin", "user"}) || len(rules) != 0 {
		t.Fatalf("roles %v, %d rules: want admin and user with no rule at all", roles, len(rules))
	}
	if !strings.Contains(stderr, "not carried over: authorization.provider.use: provider \"my_company.authz:OpaProvider\"") {
		t.Fatalf("report lacks the provider line:\n%s", stderr)
	}
}

// TestImportDeerFlowServes starts the suite on an imported configuration
// and checks that the DeerFlow role policy is what the runtime enforces at
// assembly: a guest sees only the tools its allow list names.
func TestImportDeerFlowServes(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.jsonl")
	os.WriteFile(tools, []byte(`{"name": "get_forecast", "description": "Weather forecast for a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}, "server": "weather"}
{"name": "get_alerts", "description": "Weather alerts for a US state", "input_schema": {"type": "object", "properties": {"state": {"type": "string"}}}, "server": "weather"}
`), 0o600)
	os.WriteFile(filepath.Join(dir, "extensions_config.json"), []byte(`{"mcpServers": {"weather": {"type": "static", "path": "`+tools+`"}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
tools:
  - {name: ls, group: file:read, use: "deerflow.sandbox.tools:ls_tool"}
  - {name: read_file, group: file:read, use: "deerflow.sandbox.tools:read_file_tool"}
  - {name: write_file, group: file:write, use: "deerflow.sandbox.tools:write_file_tool"}
tool_groups: [{name: "file:read"}, {name: "file:write"}]
authorization:
  enabled: true
  provider:
    use: deerflow.authz.rbac:RbacAuthorizationProvider
    config:
      roles:
        user:
          tools: {allow: "*", deny: [write_file]}
        guest:
          tools: {allow: [read_file, get_forecast]}
`), 0o600)
	out := filepath.Join(dir, "toolplane.yaml")
	if _, _, err := runImport(t, filepath.Join(dir, "config.yaml"), "-o", out); err != nil {
		t.Fatal(err)
	}
	cfg := loadWritten(t, out)
	cfg.Server.DataDir = filepath.Join(dir, "data")
	cfg.Server.GRPCAddr, cfg.Server.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Server.DrainPeriod, cfg.Server.ShutdownTimeout = time.Millisecond, 5*time.Second
	cfg.Auth.Enabled = true
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	cfg.Auth.Tokens = []config.Token{
		{Name: "admin", SHA256: sum("admin-token"), Kind: "user", Subject: "root", Tenant: "default", Roles: []string{"admin"}},
		{Name: "guest", SHA256: sum("guest-token"), Kind: "user", Subject: "gina", Tenant: "default", Roles: []string{"guest"}},
		{Name: "user", SHA256: sum("user-token"), Kind: "user", Subject: "ursula", Tenant: "default", Roles: []string{"user"}},
	}
	addr := startSuite(t, cfg)
	visible := func(token string) []string {
		cc, err := grpcx.Dial(addr, grpcx.DialOptions{Token: token, MaxMessageBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		rt := runtimev1.NewRuntimeServiceClient(cc)
		ctx := context.Background()
		th, err := rt.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := rt.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th.GetThread().GetThreadId()})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range r.GetTools() {
			if s.GetSource() != "builtin" {
				names = append(names, s.GetName())
			}
		}
		return append(names, r.GetDeferred()...)
	}
	guest := visible("guest-token")
	if !slices.Contains(guest, "read_file") || !slices.Contains(guest, "get_forecast") || slices.Contains(guest, "ls") || slices.Contains(guest, "get_alerts") || slices.Contains(guest, "write_file") {
		t.Fatalf("guest sees %v, want read_file and get_forecast only (of the config and MCP tools)", guest)
	}
	t.Logf("guest sees %v", guest)
	user := visible("user-token")
	t.Logf("user sees %v", user)
	if !slices.Contains(user, "ls") || !slices.Contains(user, "get_alerts") || slices.Contains(user, "write_file") {
		t.Fatalf("user sees %v, want everything but write_file", user)
	}
}
