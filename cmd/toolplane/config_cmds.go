package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/runtime"
)

func init() { extraCommands = append(extraCommands, newConfigCmd) }

// newConfigCmd returns `toolplane config`, with `import-deerflow`.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with toolplane.yaml (import a DeerFlow deployment)"}
	var out string
	var force bool
	imp := &cobra.Command{
		Use:   "import-deerflow CONFIG_YAML [EXTENSIONS_CONFIG_JSON]",
		Short: "Write a complete toolplane.yaml from a DeerFlow config.yaml (and extensions_config.json)",
		Long: `Write a complete toolplane.yaml from a DeerFlow deployment: tools, tool_groups,
tool_search, tool_output, skills, sandbox.allow_host_bash, log_level and the
authorization roles (translated into authz.authorization); the MCP servers file
is referenced as is (catalog.extensions_config, absolute path). Without
EXTENSIONS_CONFIG_JSON, extensions_config.json and then mcp_config.json next
to CONFIG_YAML are used when present.

Every key that could not be carried over is reported on stderr, one line each
with its path, and repeated as comments at the top of the written file. The
result is loaded and validated exactly as 'toolplane serve --config' does
before it is written. See docs/import-deerflow.md.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(c *cobra.Command, a []string) error {
			ext := ""
			if len(a) == 2 {
				ext = a[1]
			}
			res, err := importDeerFlow(a[0], ext)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			data, err := res.render()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				if _, err := c.OutOrStdout().Write(data); err != nil {
					return err
				}
			} else {
				flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
				if !force {
					flag |= os.O_EXCL
				}
				f, err := os.OpenFile(out, flag, 0o644)
				if err != nil {
					if errors.Is(err, os.ErrExist) {
						return &exitError{code: 2, err: fmt.Errorf("-o: %s exists (use --force to overwrite)", out)}
					}
					return err
				}
				if _, err := f.Write(data); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				fmt.Fprintf(c.ErrOrStderr(), "wrote %s\n", out)
			}
			res.printReport(c.ErrOrStderr())
			return nil
		},
	}
	imp.Flags().StringVarP(&out, "output", "o", "-", "output file (- = stdout)")
	imp.Flags().BoolVar(&force, "force", false, "overwrite an existing output file")
	cmd.AddCommand(imp)
	return cmd
}

// dropped is one DeerFlow key that was not carried over (or only partly).
type dropped struct {
	// Path is the key path in the DeerFlow file ("tools[0]",
	// "authorization.provider.config.roles.guest.routes",
	// "extensions_config.json: mcpServers.github.oauth").
	Path string
	// Reason says why, and what to do instead when there is something.
	Reason string
}

// importResult is a translated DeerFlow deployment.
type importResult struct {
	// Config is the complete Toolplane configuration (defaults filled in).
	Config app.Config
	// Dropped lists the keys not carried over, in file order.
	Dropped []dropped
	// ConfigPath and ExtensionsPath are the absolute source paths
	// (ExtensionsPath "" when there was none).
	ConfigPath, ExtensionsPath string
}

func (r *importResult) drop(path, format string, args ...any) {
	r.Dropped = append(r.Dropped, dropped{Path: path, Reason: fmt.Sprintf(format, args...)})
}

// DeerFlow `use` paths of the sandbox tools and their Toolplane
// implementations (docs/deerflow.md §1.1, services/runtime ToolConfig.Use).
var deerflowToolUses = map[string]string{
	"deerflow.sandbox.tools:ls_tool":          "file.ls",
	"deerflow.sandbox.tools:read_file_tool":   "file.read",
	"deerflow.sandbox.tools:write_file_tool":  "file.write",
	"deerflow.sandbox.tools:str_replace_tool": "file.str_replace",
	"deerflow.sandbox.tools:glob_tool":        "file.glob",
	"deerflow.sandbox.tools:grep_tool":        "file.grep",
	"deerflow.sandbox.tools:bash_tool":        "bash",
}

// deerflowMaxResults are the fixed result caps of file.glob and file.grep
// (services/runtime/runtimetools/search.go); a DeerFlow entry setting
// exactly this max_results carries over without a report line.
var deerflowMaxResults = map[string]string{"file.glob": "200", "file.grep": "100"}

// deerflowImplNames are the names the Toolplane implementations bind
// (docs/deerflow.md §1.2 step 4: the object's own name wins).
var deerflowImplNames = map[string]string{
	"file.ls": "ls", "file.read": "read_file", "file.write": "write_file", "file.str_replace": "str_replace",
	"file.glob": "glob", "file.grep": "grep", "bash": "bash", "web.fetch": "web_fetch",
}

// deerflowWebUse maps DeerFlow's community web tools: any
// `deerflow.community.<provider>.tools:web_fetch_tool` becomes Toolplane's
// web.fetch (fetched through the egress policy instead of the provider);
// web_search providers (Tavily, DuckDuckGo, ...) have no Toolplane
// backend and are reported with what to configure instead.
func deerflowWebUse(use string) (impl string, search bool) {
	mod, obj, ok := strings.Cut(use, ":")
	if !ok || !strings.HasPrefix(mod, "deerflow.community.") {
		return "", false
	}
	switch obj {
	case "web_fetch_tool":
		return "web.fetch", false
	case "web_search_tool":
		return "", true
	}
	return "", false
}

// deerflowRBACProvider is the `use` of DeerFlow's built-in RBAC provider
// (docs/deerflow.md §3.8), the only provider whose roles are imported.
const deerflowRBACProvider = "deerflow.authz.rbac:RbacAuthorizationProvider"

// shippedRoles are the roles of Toolplane's default policy
// (authzcasbin.DefaultPolicy).
var shippedRoles = []string{"admin", "user"}

// deerflowSectionReasons explain, for well-known DeerFlow top-level keys
// with no Toolplane equivalent, what to do instead. Other keys get a generic
// reason.
var deerflowSectionReasons = map[string]string{
	"config_version": "DeerFlow schema version; toolplane.yaml has none",
	"guardrails":     "express guardrail rules as authz policy lines with conditions (authz.policy_file)",
	"skill_scan":     "the deterministic skill scan always runs in Toolplane (skills.scan_timeout bounds it)",
	"extensions":     "agent middlewares are not supported",
	"mcp_tasks":      "durable MCP tasks are not supported",
}

// importDeerFlow translates a DeerFlow config.yaml (and extensions file; ""
// = look next to the config) into a complete Toolplane configuration that
// loads like `toolplane serve --config` loads it. Errors name the DeerFlow
// key (bad authorization values, a broken extensions file) or the Toolplane
// key the result failed on.
func importDeerFlow(cfgPath, extPath string) (*importResult, error) {
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return nil, err
	}
	r := &importResult{Config: app.DefaultConfig(), ConfigPath: abs}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgPath, err)
	}
	top := &yaml.Node{Kind: yaml.MappingNode}
	if len(doc.Content) > 0 {
		top = deref(doc.Content[0])
	}
	if top.Kind != yaml.MappingNode && top.Tag != "!!null" {
		return nil, fmt.Errorf("%s: the top level must be a mapping", cfgPath)
	}
	rt := &r.Config.Runtime
	// DeerFlow's defaults where they differ from Toolplane's: no config
	// tools or groups unless listed, tool_search off (docs/deerflow.md §2.9).
	rt.Tools, rt.ToolGroups = []runtime.ToolConfig{}, []runtime.ToolGroupConfig{}
	off := false
	rt.ToolSearch.Enabled = &off
	for _, kv := range pairs(top) {
		key, val := kv.key, kv.val
		switch key {
		case "tools":
			r.importTools(val)
		case "tool_groups":
			r.importToolGroups(val)
		case "tool_search":
			r.importToolSearch(val)
		case "tool_output":
			r.importToolOutput(val)
		case "skills":
			r.importSkills(val)
		case "authorization":
			if err := r.importAuthorization(val); err != nil {
				return nil, err
			}
		case "sandbox":
			r.importSandbox(val)
		case "log_level":
			r.importLogLevel(val)
		case "models":
			r.importModels(val)
		case "loop_detection":
			r.importLoopDetection(val)
		case "token_budget":
			r.importTokenBudget(val)
		case "subagents":
			r.importSubagents(val)
		case "acp_agents":
			r.importACPAgents(val)
		case "skill_evolution":
			r.importSkillEvolution(val)
		default:
			reason, ok := deerflowSectionReasons[key]
			if !ok {
				reason = "no Toolplane equivalent"
			}
			r.drop(key, "%s", reason)
		}
	}
	if err := r.importExtensions(extPath); err != nil {
		return nil, err
	}
	r.Config.SetDefaults()
	// The result must load as `toolplane serve --config` loads it.
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	var check app.Config
	if err := config.Decode(body, &check); err != nil {
		return nil, fmt.Errorf("generated configuration does not load: %w", err)
	}
	check.SetDefaults()
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("generated configuration does not validate: %w", err)
	}
	return r, nil
}

var (
	toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// importTools maps `tools` (docs/deerflow.md §1.1). Only DeerFlow's
// sandbox file and bash tools have Toolplane implementations; the rest are
// reported. Later duplicates of a name are dropped (DeerFlow: first wins).
func (r *importResult) importTools(n *yaml.Node) {
	items, ok := seq(n)
	if !ok {
		r.drop("tools", "not a list")
		return
	}
	seen := map[string]bool{}
	for i, it := range items {
		p := fmt.Sprintf("tools[%d]", i)
		fields := pairs(it)
		if fields == nil {
			r.drop(p, "not a mapping")
			continue
		}
		var name, group, use string
		var extra []string
		maxResults := ""
		for _, kv := range fields {
			switch kv.key {
			case "name":
				name = scalar(kv.val)
			case "group":
				group = scalar(kv.val)
			case "use":
				use = scalar(kv.val)
			case "max_results":
				maxResults = scalar(kv.val)
				extra = append(extra, kv.key)
			default:
				extra = append(extra, kv.key)
			}
		}
		label := p
		if name != "" {
			label = fmt.Sprintf("%s (%s)", p, name)
		}
		impl, known := deerflowToolUses[use]
		webImpl, webSearch := deerflowWebUse(use)
		if webImpl != "" {
			impl, known = webImpl, true
		}
		switch {
		case webSearch:
			r.drop(label, "use %q: Toolplane's web_search asks a SearXNG or OpenAI-compatible search backend; configure runtime.web.search and list {name: web_search, group: web, use: web.search}", use)
			continue
		case !known:
			r.drop(label, "use %q has no Toolplane implementation (built-ins: file.read, file.write, file.ls, file.str_replace, file.glob, file.grep, bash, web.fetch, web.search); serve it from an MCP server", use)
			continue
		case !toolNameRE.MatchString(name):
			r.drop(label+".name", "%q must match %s", name, toolNameRE)
			continue
		case group == "":
			r.drop(label+".group", "missing (required)")
			continue
		case seen[name]:
			r.drop(label, "duplicate name %q (the first entry wins, as in DeerFlow)", name)
			continue
		}
		seen[name] = true
		if own := deerflowImplNames[impl]; own != name {
			r.drop(label+".name", "the implementation's own name %q is bound instead (the runtime reports the mismatch, as DeerFlow does)", own)
		}
		r.Config.Runtime.Tools = append(r.Config.Runtime.Tools, runtime.ToolConfig{Name: name, Group: group, Use: impl})
		for _, k := range extra {
			if k == "max_results" && maxResults != "" && maxResults == deerflowMaxResults[impl] {
				continue // DeerFlow's default, which is Toolplane's fixed cap
			}
			if k == "timeout" && impl == "web.fetch" && r.importFetchTimeout(it) {
				continue
			}
			r.drop(p+"."+k, "per-tool options are not supported by the %s implementation", impl)
		}
	}
}

// importToolGroups maps `tool_groups` (names only; declarative in both).
func (r *importResult) importToolGroups(n *yaml.Node) {
	items, ok := seq(n)
	if !ok {
		r.drop("tool_groups", "not a list")
		return
	}
	for i, it := range items {
		p := fmt.Sprintf("tool_groups[%d]", i)
		name := ""
		for _, kv := range pairs(it) {
			if kv.key == "name" {
				name = scalar(kv.val)
			} else {
				r.drop(p+"."+kv.key, "group options are not supported")
			}
		}
		if name == "" {
			r.drop(p, "missing name")
			continue
		}
		r.Config.Runtime.ToolGroups = append(r.Config.Runtime.ToolGroups, runtime.ToolGroupConfig{Name: name})
	}
}

// importToolSearch maps `tool_search` (docs/deerflow.md §2.9): enabled
// (default false in DeerFlow) and auto_promote_top_k (clamped to 1..5).
func (r *importResult) importToolSearch(n *yaml.Node) {
	ts := &r.Config.Runtime.ToolSearch
	for _, kv := range pairs(n) {
		p := "tool_search." + kv.key
		switch kv.key {
		case "enabled":
			var b bool
			if err := kv.val.Decode(&b); err != nil {
				r.drop(p, "not a boolean (%s); tool_search left off", scalar(kv.val))
				continue
			}
			ts.Enabled = &b
		case "auto_promote_top_k":
			var k int
			if err := kv.val.Decode(&k); err != nil {
				r.drop(p, "not an integer (%s); default 3 kept", scalar(kv.val))
				continue
			}
			clamped := min(max(k, 1), 5)
			if clamped != k {
				r.drop(p, "%d clamped to %d (range 1..5, as DeerFlow clamps it)", k, clamped)
			}
			ts.AutoPromoteTopK = clamped
		default:
			r.drop(p, "no Toolplane equivalent")
		}
	}
}

// importToolOutput maps `tool_output` (docs/deerflow.md §6.2 ToolOutputBudget).
func (r *importResult) importToolOutput(n *yaml.Node) {
	to := &r.Config.Runtime.ToolOutput
	disabled := false
	for _, kv := range pairs(n) {
		p := "tool_output." + kv.key
		intInto := func(dst *int) {
			var v int
			if err := kv.val.Decode(&v); err != nil || v < 0 {
				r.drop(p, "not a non-negative integer (%s); default kept", scalar(kv.val))
				return
			}
			*dst = v
		}
		switch kv.key {
		case "enabled":
			var b bool
			if err := kv.val.Decode(&b); err != nil {
				r.drop(p, "not a boolean (%s)", scalar(kv.val))
				continue
			}
			disabled = !b
		case "externalize_min_chars":
			intInto(&to.ExternalizeMinChars)
		case "preview_head_chars":
			intInto(&to.PreviewHeadChars)
		case "preview_tail_chars":
			intInto(&to.PreviewTailChars)
		case "exempt_tools":
			var l []string
			if err := kv.val.Decode(&l); err != nil {
				r.drop(p, "not a list of names")
				continue
			}
			to.ExemptTools = l
		case "fallback_max_chars", "fallback_head_chars", "fallback_tail_chars":
			r.drop(p, "Toolplane always stores the output as a thread artifact (no truncation fallback)")
		case "storage_subdir":
			r.drop(p, "fixed in Toolplane: /mnt/user-data/outputs/.tool-results/")
		case "tool_overrides":
			r.drop(p, "per-tool thresholds are not supported (runtime.tool_output.exempt_tools exempts tools entirely)")
		default:
			r.drop(p, "no Toolplane equivalent")
		}
	}
	if disabled {
		to.ExternalizeMinChars = -1
	}
}

// importSkills maps `skills` (docs/deerflow.md §4.1, §4.5).
func (r *importResult) importSkills(n *yaml.Node) {
	for _, kv := range pairs(n) {
		p := "skills." + kv.key
		switch kv.key {
		case "container_path":
			v := scalar(kv.val)
			if !path.IsAbs(v) || path.Clean(v) != v {
				r.drop(p, "%q is not a clean absolute path; default %s kept", v, r.Config.Skills.ContainerPath)
				continue
			}
			r.Config.Skills.ContainerPath = v
		case "path":
			r.drop(p, "Toolplane keeps skills in its store: install each package with `toolplane skills install DIR`")
		case "deferred_discovery":
			var b bool
			if err := kv.val.Decode(&b); err == nil && b {
				continue // Toolplane always indexes skills by name behind describe_skill
			}
			r.drop(p, "Toolplane always uses deferred discovery (a name-only <skill_index> and describe_skill)")
		default:
			r.drop(p, "no Toolplane equivalent")
		}
	}
}

// importLogLevel maps `log_level` to server.log.level.
func (r *importResult) importLogLevel(n *yaml.Node) {
	v := strings.ToLower(scalar(n))
	if v == "warning" {
		v = "warn"
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, v) {
		r.drop("log_level", "%q is not one of debug, info, warning, error", scalar(n))
		return
	}
	r.Config.Server.Log.Level = v
}

// importSandbox maps `sandbox.allow_host_bash` to runtime.allow_bash
// (docs/deerflow.md §1.5). Toolplane's bash runs on the host in the
// thread workspace, so bash is enabled only when DeerFlow ran it on the host
// too (local sandbox with allow_host_bash: true); a container sandbox is
// reported and bash stays off (fail closed).
func (r *importResult) importSandbox(n *yaml.Node) {
	if n == nil {
		return
	}
	use := ""
	for _, kv := range pairs(n) {
		if kv.key == "use" {
			use = scalar(kv.val)
		}
	}
	local := use == "" || strings.Contains(use, "deerflow.sandbox.local")
	for _, kv := range pairs(n) {
		p := "sandbox." + kv.key
		switch kv.key {
		case "use":
			if !local {
				r.drop(p, "%q isolates bash in a container; Toolplane runs bash on the host in the thread workspace, so runtime.allow_bash stays false (set it only if that is acceptable)", use)
			}
		case "allow_host_bash":
			var b bool
			if err := kv.val.Decode(&b); err != nil {
				r.drop(p, "not a boolean (%s); bash stays off", scalar(kv.val))
				continue
			}
			if local {
				r.Config.Runtime.AllowBash = b
			}
		default:
			r.drop(p, "no Toolplane equivalent")
		}
	}
}

// importAuthorization translates `authorization` (docs/deerflow.md §3.1,
// §3.8) into authz.authorization. The roles come from
// provider.config.roles of the built-in RBAC provider (or, in the short
// form, from authorization.roles). Resource keys Toolplane has no type for
// (sandbox, routes) are dropped with a report line; bad allow/deny values
// are errors naming the key (authzcasbin.TranslateDeerFlow).
func (r *importResult) importAuthorization(n *yaml.Node) error {
	enabled := false
	var provider, rolesNode *yaml.Node
	rolesPath := ""
	for _, kv := range pairs(n) {
		p := "authorization." + kv.key
		switch kv.key {
		case "enabled":
			if err := kv.val.Decode(&enabled); err != nil {
				r.drop(p, "not a boolean (%s); treated as false", scalar(kv.val))
			}
		case "fail_closed":
			var b bool
			if err := kv.val.Decode(&b); err != nil {
				r.drop(p, "not a boolean (%s); Toolplane fails closed", scalar(kv.val))
				continue
			}
			if !b {
				r.Config.Authz.FilterFailOpen = true
				r.Config.Runtime.Authz.FailOpenListing = true
				r.drop(p, "false carried over for listing only (authz.filter_fail_open, runtime.authz.fail_open_listing); tool calls always fail closed in Toolplane")
			}
		case "default_role":
			r.drop(p, "Toolplane takes roles from the credential (auth.tokens[].roles, the JWT roles claim); give credentials the role %q", scalar(kv.val))
		case "provider":
			provider = kv.val
		case "roles":
			rolesNode, rolesPath = kv.val, p
		default:
			r.drop(p, "no Toolplane equivalent")
		}
	}
	if provider != nil {
		use := ""
		var cfg *yaml.Node
		for _, kv := range pairs(provider) {
			switch kv.key {
			case "use":
				use = scalar(kv.val)
			case "config":
				cfg = kv.val
			default:
				r.drop("authorization.provider."+kv.key, "no Toolplane equivalent")
			}
		}
		if use != deerflowRBACProvider {
			if enabled {
				r.drop("authorization.provider.use", "provider %q is not DeerFlow's built-in RBAC (%s): its policy cannot be translated; write authz policy lines (until then the shipped roles are imported with nothing allowed)", use, deerflowRBACProvider)
				return r.importRoles(map[string]any{}, nil, "authorization.provider.config.roles")
			}
			r.drop("authorization.provider.use", "provider %q is not DeerFlow's built-in RBAC and authorization is not enabled; nothing imported", use)
			return nil
		}
		for _, kv := range pairs(cfg) {
			if kv.key == "roles" {
				if rolesNode != nil {
					r.drop(rolesPath, "ignored: authorization.provider.config.roles is used")
				}
				rolesNode, rolesPath = kv.val, "authorization.provider.config.roles"
			} else {
				r.drop("authorization.provider.config."+kv.key, "no Toolplane equivalent")
			}
		}
	}
	if !enabled {
		if rolesNode != nil {
			r.drop(rolesPath, "not imported: authorization.enabled is not true, so DeerFlow does not enforce it (Toolplane's default policy applies)")
		}
		return nil
	}
	if rolesNode == nil {
		if provider == nil {
			return fmt.Errorf("authorization.provider: required when authorization.enabled is true (docs/deerflow.md §3.4)")
		}
		// DeerFlow's RBAC without roles knows no role: everything is denied.
		r.drop("authorization.provider.config.roles", "missing: DeerFlow's RBAC then knows no role and denies everything")
		return r.importRoles(map[string]any{}, nil, "authorization.provider.config.roles")
	}
	var raw any
	if err := rolesNode.Decode(&raw); err != nil {
		return fmt.Errorf("%s: %v", rolesPath, err)
	}
	roles, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want a mapping of role name to policy", rolesPath)
	}
	return r.importRoles(roles, rolesNode, rolesPath)
}

// importRoles drops the resource keys Toolplane has no type for, defines
// the shipped roles DeerFlow does not (nothing allowed), checks the result
// with authzcasbin.TranslateDeerFlow and sets authz.authorization. rolesNode
// (may be nil) gives the file order of the report lines.
func (r *importResult) importRoles(roles map[string]any, rolesNode *yaml.Node, rolesPath string) error {
	for _, kv := range pairs(rolesNode) {
		pol, ok := roles[kv.key].(map[string]any)
		if !ok {
			continue // TranslateDeerFlow reports the bad value
		}
		for _, rk := range pairs(kv.val) {
			switch rk.key {
			case "tools", "models", "skills", "mcp_servers":
			case "sandbox":
				delete(pol, rk.key)
				r.drop(rolesPath+"."+kv.key+"."+rk.key, "Toolplane has no sandbox resource type (the bash tool is governed as a tool)")
			case "routes":
				delete(pol, rk.key)
				r.drop(rolesPath+"."+kv.key+"."+rk.key, "gateway routes are not Toolplane resources (thread access is owner-scoped)")
			default:
				delete(pol, rk.key)
				r.drop(rolesPath+"."+kv.key+"."+rk.key, "custom resource key; Toolplane has resource types tool, model, skill and mcp_server only")
			}
		}
	}
	// DeerFlow denies a role it does not define; Toolplane's shipped
	// default policy would grant admin and user everything. Define them
	// with nothing allowed so the import keeps DeerFlow's fail-closed rule.
	for _, role := range shippedRoles {
		if _, ok := roles[role]; ok {
			continue
		}
		none := map[string]any{}
		for _, k := range []string{"tools", "models", "skills", "mcp_servers", "acp_agents"} {
			none[k] = map[string]any{"allow": false}
		}
		roles[role] = none
		r.drop(rolesPath+"."+role, "not defined: DeerFlow denies an undefined role, so role %q is imported with nothing allowed (replacing Toolplane's default lines for it)", role)
	}
	section := map[string]any{"roles": roles}
	if _, _, err := authzcasbin.TranslateDeerFlow(section, rolesPath[:len(rolesPath)-len(".roles")]); err != nil {
		return err
	}
	r.Config.Authz.Authorization = section
	return nil
}

// importExtensions references the MCP servers file as is and reports what
// in it the catalog does not use (docs/deerflow.md §5.1).
func (r *importResult) importExtensions(extPath string) error {
	if extPath == "" {
		dir := filepath.Dir(r.ConfigPath)
		for _, name := range []string{"extensions_config.json", "mcp_config.json"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				extPath = filepath.Join(dir, name)
				break
			}
		}
		if extPath == "" {
			r.drop("extensions_config.json", "not given and not found next to %s; catalog.extensions_config left at its default (no MCP servers until the file exists)", filepath.Base(r.ConfigPath))
			return nil
		}
	}
	abs, err := filepath.Abs(extPath)
	if err != nil {
		return err
	}
	f, _, err := catalogconfig.Load(abs)
	if err != nil {
		return fmt.Errorf("%s: %w", extPath, err)
	}
	r.ExtensionsPath = abs
	r.Config.Catalog.ExtensionsConfig = abs
	file := filepath.Base(abs) + ": "
	for _, s := range f.Servers {
		if err := s.Validate(); err != nil {
			r.drop(file+"mcpServers."+s.Name, "the catalog will refuse this server: %v", err)
		}
		for _, x := range s.Extra {
			reason := "ignored by the Toolplane catalog"
			switch x.Key {
			case "oauth":
				// Carried over: the catalog reads the block itself
				// (docs/architecture.md §10.6); only a block it would refuse
				// is reported.
				if _, err := s.ParseOAuth(); err != nil {
					r.drop(file+"mcpServers."+s.Name+".oauth", "the catalog will refuse this server: %v", err)
				}
				continue
			case "task_toolsets":
				reason = "durable MCP tasks are not supported"
			}
			r.drop(file+"mcpServers."+s.Name+"."+x.Key, "%s", reason)
		}
	}
	for _, x := range f.Extra {
		switch x.Key {
		case "skills":
			var states map[string]map[string]any
			if err := yaml.Unmarshal(x.Value, &states); err != nil || len(states) == 0 {
				r.drop(file+"skills", "skill enabled states are not read from this file; use `toolplane skills enable|disable NAME`")
				continue
			}
			names := make([]string, 0, len(states))
			for n := range states {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				r.drop(file+"skills."+n, "skill enabled state is not read from this file; use `toolplane skills enable|disable %s`", n)
			}
		case "middlewares", "mcpInterceptors":
			r.drop(file+x.Key, "agent middlewares and MCP interceptors are not supported")
		default:
			r.drop(file+x.Key, "ignored by the Toolplane catalog")
		}
	}
	return nil
}

// body is the YAML of the configuration, without the header.
func (r *importResult) body() ([]byte, error) {
	var root yaml.Node
	if err := root.Encode(&r.Config); err != nil {
		return nil, fmt.Errorf("encode toolplane.yaml: %w", err)
	}
	if r.Config.Authz.Authorization == nil {
		// Absent, not `authorization: {}` (an empty DeerFlow section).
		for _, top := range pairs(&root) {
			if top.key == "authz" {
				deleteKey(top.val, "authorization")
			}
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, fmt.Errorf("encode toolplane.yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// render is the written file: a header naming the sources and every
// dropped key (as comments), then the configuration.
func (r *importResult) render() ([]byte, error) {
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# toolplane.yaml written by `toolplane config import-deerflow` (docs/import-deerflow.md)\n")
	fmt.Fprintf(&b, "# from %s\n", r.ConfigPath)
	if r.ExtensionsPath != "" {
		fmt.Fprintf(&b, "# MCP servers: %s (referenced as is: catalog.extensions_config)\n", r.ExtensionsPath)
	}
	if len(r.Dropped) == 0 {
		fmt.Fprintf(&b, "# Every DeerFlow key was carried over.\n")
	} else {
		fmt.Fprintf(&b, "# Not carried over (%d):\n", len(r.Dropped))
		for _, d := range r.Dropped {
			fmt.Fprintf(&b, "#   %s: %s\n", d.Path, oneLine(d.Reason))
		}
	}
	b.WriteString("\n")
	b.Write(body)
	return b.Bytes(), nil
}

// printReport prints the dropped keys, one line each with its path.
func (r *importResult) printReport(w io.Writer) {
	keys := "keys"
	if len(r.Dropped) == 1 {
		keys = "key"
	}
	fmt.Fprintf(w, "imported %d config tools, %d tool groups, %d models, tool_search %s, authorization %s; %d %s not carried over\n",
		len(r.Config.Runtime.Tools), len(r.Config.Runtime.ToolGroups), len(r.Config.Runtime.Loop.Models), onOff(*r.Config.Runtime.ToolSearch.Enabled),
		map[bool]string{true: "roles translated", false: "not imported"}[r.Config.Authz.Authorization != nil], len(r.Dropped), keys)
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "not carried over: %s: %s\n", d.Path, oneLine(d.Reason))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// deleteKey removes key from a mapping node.
func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// kv is one mapping entry.
type kv struct {
	key string
	val *yaml.Node
}

// deref follows YAML aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// pairs returns the entries of a mapping node in file order (nil for
// anything else, including null). Merge keys (<<) are expanded in place.
func pairs(n *yaml.Node) []kv {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var out []kv
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		if k.Value == "<<" && k.Tag == "!!merge" {
			out = append(out, pairs(v)...)
			continue
		}
		out = append(out, kv{key: k.Value, val: v})
	}
	return out
}

// seq returns the items of a sequence node; null is an empty list.
func seq(n *yaml.Node) ([]*yaml.Node, bool) {
	n = deref(n)
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
	}
	return out, true
}

// scalar returns a scalar node's text ("" otherwise).
func scalar(n *yaml.Node) string {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

// openAICompatible reports whether a DeerFlow model `use` speaks the OpenAI
// chat API, the only one Toolplane's agent loop speaks (runtime.loop.models).
func openAICompatible(use string) bool {
	mod, _, _ := strings.Cut(use, ":")
	return mod == "langchain_openai" || strings.HasPrefix(mod, "deerflow.models.patched_") || mod == "deerflow.models.vllm_provider"
}

// importModels maps `models` to runtime.loop.models: OpenAI-compatible
// models only; `api_key: $VAR` becomes api_key_env (a literal key is never
// copied); per-model options without a Toolplane key are reported.
func (r *importResult) importModels(n *yaml.Node) {
	items, ok := seq(n)
	if !ok {
		r.drop("models", "not a list")
		return
	}
	lc := &r.Config.Runtime.Loop
	seen := map[string]bool{}
	for i, it := range items {
		p := fmt.Sprintf("models[%d]", i)
		fields := pairs(it)
		m := runtime.ModelConfig{}
		use := ""
		for _, kv := range fields {
			switch kv.key {
			case "name":
				m.Name = scalar(kv.val)
			case "use":
				use = scalar(kv.val)
			}
		}
		label := p
		if m.Name != "" {
			label = fmt.Sprintf("%s (%s)", p, m.Name)
		}
		switch {
		case m.Name == "":
			r.drop(p, "missing name")
			continue
		case seen[m.Name]:
			r.drop(label, "duplicate name %q", m.Name)
			continue
		case !openAICompatible(use):
			r.drop(label, "use %q is not an OpenAI-compatible chat model; Toolplane's agent loop speaks the OpenAI chat API (point base_url at a compatible endpoint by hand)", use)
			continue
		}
		var later []dropped
		for _, kv := range fields {
			kp := label + "." + kv.key
			v := scalar(kv.val)
			switch kv.key {
			case "name", "use":
			case "model":
				m.Model = v
			case "base_url", "api_base", "openai_api_base":
				m.BaseURL = v
			case "api_key":
				if name, ok := strings.CutPrefix(v, "$"); ok && envNameRE.MatchString(strings.TrimSuffix(strings.TrimPrefix(name, "{"), "}")) {
					name = strings.TrimSuffix(strings.TrimPrefix(name, "{"), "}")
					m.APIKeyEnv = name
				} else if v != "" {
					later = append(later, dropped{kp, "a literal API key is never copied; put it in an environment variable and set api_key_env"})
				}
			case "max_tokens":
				if err := kv.val.Decode(&m.MaxTokens); err != nil || m.MaxTokens < 0 {
					m.MaxTokens = 0
					later = append(later, dropped{kp, "not a non-negative integer"})
				}
			case "temperature":
				var t float64
				if err := kv.val.Decode(&t); err != nil {
					later = append(later, dropped{kp, "not a number"})
					continue
				}
				m.Temperature = &t
			case "max_retries":
				var k int
				if err := kv.val.Decode(&k); err != nil || k < 0 {
					later = append(later, dropped{kp, "not a non-negative integer"})
					continue
				}
				m.MaxRetries = &k
			case "supports_vision":
				if err := kv.val.Decode(&m.SupportsVision); err != nil {
					m.SupportsVision = false
					later = append(later, dropped{kp, "not a boolean"})
				}
			case "timeout", "request_timeout", "default_request_timeout":
				var sec float64
				if err := kv.val.Decode(&sec); err != nil || sec <= 0 || math.IsInf(sec, 0) {
					later = append(later, dropped{kp, "not a positive number of seconds"})
					continue
				}
				m.Timeout = time.Duration(sec * float64(time.Second))
			default:
				if kv.val.Tag != "!!null" {
					later = append(later, dropped{kp, "no Toolplane equivalent"})
				}
			}
		}
		if m.BaseURL == "" && strings.HasPrefix(use, "langchain_openai:") {
			m.BaseURL = "https://api.openai.com/v1"
		}
		if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.drop(label, "base_url %q is not an http(s) URL (a $VAR base URL must be written out)", m.BaseURL)
			continue
		}
		seen[m.Name] = true
		lc.Models = append(lc.Models, m)
		r.Dropped = append(r.Dropped, later...)
	}
}

// importLoopDetection maps `loop_detection` to runtime.loop.loop_detection
// (docs/deerflow.md §6.2 LoopDetection). Values that break Toolplane's
// ordering rule (1 <= warn < hard <= window, tool_warn < tool_hard) leave the
// defaults in place, reported.
func (r *importResult) importLoopDetection(n *yaml.Node) {
	ld := r.Config.Runtime.Loop.LoopDetection
	keys := map[string]*int{"warn_threshold": &ld.WarnThreshold, "hard_limit": &ld.HardLimit, "window_size": &ld.Window,
		"tool_freq_warn": &ld.ToolWarn, "tool_freq_hard_limit": &ld.ToolHard}
	for _, kv := range pairs(n) {
		p := "loop_detection." + kv.key
		if dst, ok := keys[kv.key]; ok {
			if err := kv.val.Decode(dst); err != nil {
				r.drop(p, "not an integer")
			}
			continue
		}
		switch kv.key {
		case "enabled":
			var b bool
			if err := kv.val.Decode(&b); err != nil {
				r.drop(p, "not a boolean")
				continue
			}
			ld.Enabled = &b
		default:
			if kv.val.Tag != "!!null" {
				r.drop(p, "no Toolplane equivalent")
			}
		}
	}
	if ld.WarnThreshold < 1 || ld.HardLimit <= ld.WarnThreshold || ld.Window < ld.HardLimit || ld.ToolWarn < 1 || ld.ToolHard <= ld.ToolWarn {
		r.drop("loop_detection", "thresholds break 1 <= warn_threshold < hard_limit <= window_size and tool_freq_warn < tool_freq_hard_limit; Toolplane's defaults kept")
		return
	}
	r.Config.Runtime.Loop.LoopDetection = ld
}

// importTokenBudget maps `token_budget` to runtime.loop.token_budget and
// token_budget_warn (docs/deerflow.md §6.2 TokenBudget).
func (r *importResult) importTokenBudget(n *yaml.Node) {
	lc := &r.Config.Runtime.Loop
	enabled := false
	var budget int64
	warn := lc.TokenBudgetWarn
	for _, kv := range pairs(n) {
		p := "token_budget." + kv.key
		var err error
		switch kv.key {
		case "enabled":
			err = kv.val.Decode(&enabled)
		case "max_tokens":
			err = kv.val.Decode(&budget)
		case "warn_threshold":
			err = kv.val.Decode(&warn)
			if err == nil && (warn <= 0 || warn > 1) {
				err = fmt.Errorf("outside (0, 1]")
			}
		case "hard_stop_threshold":
			var h float64
			if kv.val.Decode(&h) == nil && h == 1 {
				continue // Toolplane stops at the budget
			}
			r.drop(p, "Toolplane stops at the budget itself (1.0)")
		default:
			if kv.val.Tag != "!!null" {
				r.drop(p, "no Toolplane equivalent (one budget for input + output)")
			}
		}
		if err != nil {
			r.drop(p, "invalid value %q; ignored", scalar(kv.val))
			if kv.key == "warn_threshold" {
				warn = lc.TokenBudgetWarn
			}
		}
	}
	if !enabled {
		return
	}
	if budget < 1000 {
		r.drop("token_budget.max_tokens", "%d is below Toolplane's minimum budget of 1000; no budget set", budget)
		return
	}
	lc.TokenBudget, lc.TokenBudgetWarn = budget, warn
}

// importSubagents maps the limits of `subagents` to runtime.loop.subagents
// (docs/deerflow.md §1.4, §6.2 SubagentLimit). Custom subagent types and
// per-agent overrides are reported: Toolplane's types list replaces the
// built-in general-purpose type, so they are written by hand.
func (r *importResult) importSubagents(n *yaml.Node) {
	sa := &r.Config.Runtime.Loop.Subagents
	for _, kv := range pairs(n) {
		p := "subagents." + kv.key
		switch kv.key {
		case "max_turns":
			var k int
			if err := kv.val.Decode(&k); err != nil || k < 1 {
				r.drop(p, "not a positive integer")
				continue
			}
			sa.MaxModelCalls = k
		case "max_total_per_run":
			var k int
			if err := kv.val.Decode(&k); err != nil || k < 1 {
				r.drop(p, "not a positive integer")
				continue
			}
			sa.MaxTotal = min(k, 50)
		case "token_budget":
			enabled, budget := true, int64(0)
			for _, tb := range pairs(kv.val) {
				switch tb.key {
				case "enabled":
					_ = tb.val.Decode(&enabled)
				case "max_tokens":
					_ = tb.val.Decode(&budget)
				default:
					r.drop(p+"."+tb.key, "no Toolplane equivalent")
				}
			}
			if enabled && budget > 0 {
				sa.TokenBudget = budget
			}
		case "custom_agents", "agents":
			for _, a := range pairs(kv.val) {
				r.drop(p+"."+a.key, "add it to runtime.loop.subagents.types by hand (that list replaces the built-in general-purpose type)")
			}
		default:
			if kv.val.Tag != "!!null" {
				r.drop(p, "no Toolplane equivalent (a subagent's turn is bounded by runtime.loop limits)")
			}
		}
	}
}

// importFetchTimeout carries a DeerFlow web_fetch `timeout` (seconds) to
// runtime.web.fetch.timeout; false when it is not a positive number.
func (r *importResult) importFetchTimeout(tool *yaml.Node) bool {
	for _, kv := range pairs(tool) {
		if kv.key != "timeout" {
			continue
		}
		var sec float64
		if err := kv.val.Decode(&sec); err != nil || sec <= 0 || math.IsInf(sec, 0) || sec > 3600 {
			return false
		}
		r.Config.Runtime.Web.Fetch.Timeout = time.Duration(sec * float64(time.Second))
		return true
	}
	return false
}
