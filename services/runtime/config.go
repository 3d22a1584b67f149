package runtime

import (
	"fmt"
	"regexp"
	"time"

	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// ToolConfig is one `runtime.tools` entry (docs/deerflow.md §1.1): a
// config tool backed by a built-in implementation named by Use.
type ToolConfig struct {
	// Name is the configured name. When it differs from the
	// implementation's own name, the implementation's name is bound and the
	// mismatch is reported (docs/deerflow.md §1.2 step 4).
	Name string `yaml:"name"`
	// Group is the tool group (`file:read`, `file:write`, `bash`, ...),
	// matched against an agent's tool_groups.
	Group string `yaml:"group"`
	// Use names the implementation: file.read, file.write, file.ls,
	// file.str_replace, file.glob, file.grep, bash, web.fetch or web.search
	// (webconfig.go). Any other value fails at start.
	Use string `yaml:"use"`
}

// ToolGroupConfig is one `runtime.tool_groups` entry; declarative only
// (group membership is not validated against it, docs/deerflow.md §1.1).
type ToolGroupConfig struct {
	// Name is the group name.
	Name string `yaml:"name"`
}

// ToolSearchConfig is `runtime.tool_search` (docs/deerflow.md §2.9).
type ToolSearchConfig struct {
	// Enabled defers MCP tools behind tool_search (default true; an agent's
	// tool_search settings override it).
	Enabled *bool `yaml:"enabled"`
	// AutoPromoteTopK is how many routing matches are auto-promoted from the
	// user's message (default 3, clamped to 1..5, docs/deerflow.md §2.8).
	AutoPromoteTopK int `yaml:"auto_promote_top_k"`
	// ExemptServers are servers whose tools are never deferred (for agents
	// without their own tool_search settings).
	ExemptServers []string `yaml:"exempt_servers"`
	// DeferredListMax is the largest deferred set listed name by name in
	// <available-deferred-tools>; above it the section lists servers with
	// counts and a hint to search (default 200).
	DeferredListMax int `yaml:"deferred_list_max"`
	// SearchLimit is the maximum number of tool_search results (default 5).
	SearchLimit int `yaml:"search_limit"`
}

// ToolBoundsConfig is `runtime.tool_bounds`: the largest description and
// input schema of one MCP tool bound for a model; longer ones are
// truncated with a notice (docs/architecture.md §3.1).
type ToolBoundsConfig struct {
	// MaxDescriptionBytes bounds a tool description (default 8192).
	MaxDescriptionBytes int `yaml:"max_description_bytes"`
	// MaxSchemaBytes bounds a tool's input schema as JSON (default 65536).
	MaxSchemaBytes int `yaml:"max_schema_bytes"`
}

// ToolOutputConfig is `runtime.tool_output`, the output budget
// (docs/deerflow.md §6.2 ToolOutputBudget).
type ToolOutputConfig struct {
	// ExternalizeMinChars: a text result longer than this is stored as a
	// thread artifact under /mnt/user-data/outputs/.tool-results/ and
	// replaced by a head/tail synopsis (default 12000; negative disables).
	ExternalizeMinChars int `yaml:"externalize_min_chars"`
	// PreviewHeadChars is the synopsis head length (default 2000).
	PreviewHeadChars int `yaml:"preview_head_chars"`
	// PreviewTailChars is the synopsis tail length (default 1000).
	PreviewTailChars int `yaml:"preview_tail_chars"`
	// ExemptTools are never externalised (default [read_file], so paging
	// through an externalised result never loops); their results are still
	// cut to the budget (read_file returns whole lines and where to read on).
	ExemptTools []string `yaml:"exempt_tools"`
}

// AuthzConfig is `runtime.authz`: how the runtime treats authz failures.
type AuthzConfig struct {
	// FailOpenListing lets assembly proceed unfiltered when authz is
	// unreachable (default false: fail closed). The decision is recorded in
	// the thread's events and the metrics. Tool calls always fail closed.
	FailOpenListing bool `yaml:"fail_open_listing"`
}

// RetentionConfig is `runtime.retention` (docs/architecture.md §6;
// docs/architecture.md §6): one period per kind of state, 0 = keep forever.
type RetentionConfig struct {
	// Threads deletes threads (messages, runs, events, workspace) not
	// updated for this long; 0 keeps them forever (default 0).
	Threads time.Duration `yaml:"threads"`
	// Runs deletes finished runs (not running, not waiting for input) that
	// started this long ago; 0 keeps them (default 0).
	Runs time.Duration `yaml:"runs"`
	// Messages deletes messages older than this by whole turns (a turn
	// that ends after the cutoff is kept whole, so no tool result loses its
	// call); 0 keeps them (default 0).
	Messages time.Duration `yaml:"messages"`
	// Artifacts deletes thread artifacts (the file under /mnt/user-data and
	// the thread's entry) whose file was last modified this long ago; 0
	// keeps them (default 0).
	Artifacts time.Duration `yaml:"artifacts"`
	// FrontDoorThreads deletes the threads the MCP front door created (one
	// per MCP session, one per sessionless credential and agent: thread
	// metadata mcp_binding) not updated for this long, whatever Threads
	// says; negative keeps them (default 24h; docs/decisions/0160).
	FrontDoorThreads time.Duration `yaml:"frontdoor_threads"`
	// SweepInterval is how often retention runs (default 1h).
	SweepInterval time.Duration `yaml:"sweep_interval"`
}

// DefaultAgentConfig is `runtime.default_agent`, the agent of threads
// created without one (and the fields of the built-in "default" agent).
type DefaultAgentConfig struct {
	// Description of the default agent.
	Description string `yaml:"description"`
	// ToolGroups limits config tools to these groups; empty = all groups.
	ToolGroups []string `yaml:"tool_groups"`
	// Skills is the skills allowlist; empty = all skills.
	Skills []string `yaml:"skills"`
	// Model is the default model name (used by the agent loop).
	Model string `yaml:"model"`
	// SystemPrompt is the default system prompt.
	SystemPrompt string `yaml:"system_prompt"`
	// SubagentsEnabled binds the `task` tool.
	SubagentsEnabled bool `yaml:"subagents_enabled"`
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// DefaultTools are the config tools when `runtime.tools` is absent
// (DeerFlow's default file and bash tools, docs/deerflow.md §1.1).
func DefaultTools() []ToolConfig {
	return []ToolConfig{
		{Name: "ls", Group: "file:read", Use: "file.ls"},
		{Name: "read_file", Group: "file:read", Use: "file.read"},
		{Name: "glob", Group: "file:read", Use: "file.glob"},
		{Name: "grep", Group: "file:read", Use: "file.grep"},
		{Name: "write_file", Group: "file:write", Use: "file.write"},
		{Name: "str_replace", Group: "file:write", Use: "file.str_replace"},
		{Name: "bash", Group: "bash", Use: "bash"},
	}
}

func (c *Config) setToolDefaults() {
	if c.Tools == nil {
		c.Tools = DefaultTools()
	}
	if c.ToolGroups == nil {
		c.ToolGroups = []ToolGroupConfig{{Name: "file:read"}, {Name: "file:write"}, {Name: "bash"}}
	}
	if c.ToolSearch.Enabled == nil {
		t := true
		c.ToolSearch.Enabled = &t
	}
	if c.ToolSearch.AutoPromoteTopK == 0 {
		c.ToolSearch.AutoPromoteTopK = 3
	}
	if c.ToolSearch.DeferredListMax == 0 {
		c.ToolSearch.DeferredListMax = 200
	}
	if c.ToolSearch.SearchLimit == 0 {
		c.ToolSearch.SearchLimit = 5
	}
	if c.ToolBounds.MaxDescriptionBytes == 0 {
		c.ToolBounds.MaxDescriptionBytes = 8 << 10
	}
	if c.ToolBounds.MaxSchemaBytes == 0 {
		c.ToolBounds.MaxSchemaBytes = 64 << 10
	}
	if c.ToolOutput.ExternalizeMinChars == 0 {
		c.ToolOutput.ExternalizeMinChars = 12000
	}
	if c.ToolOutput.PreviewHeadChars == 0 {
		c.ToolOutput.PreviewHeadChars = 2000
	}
	if c.ToolOutput.PreviewTailChars == 0 {
		c.ToolOutput.PreviewTailChars = 1000
	}
	if c.ToolOutput.ExemptTools == nil {
		c.ToolOutput.ExemptTools = []string{"read_file"}
	}
	if c.Retention.SweepInterval == 0 {
		c.Retention.SweepInterval = time.Hour
	}
	if c.Retention.FrontDoorThreads == 0 {
		c.Retention.FrontDoorThreads = 24 * time.Hour
	}
	if c.ToolCallTimeout == 0 {
		c.ToolCallTimeout = 2 * time.Minute
	}
	if c.RunLease == 0 {
		c.RunLease = 30 * time.Second
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = 4096
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = runtimeassembly.DefaultCacheBytes
	}
}

func (c *Config) validateTools() error {
	for i, t := range c.Tools {
		key := fmt.Sprintf("runtime.tools[%d]", i)
		if !toolNameRE.MatchString(t.Name) {
			return fmt.Errorf("%s.name: %q must match ^[A-Za-z0-9_-]{1,64}$", key, t.Name)
		}
		if t.Group == "" {
			return fmt.Errorf("%s.group: must not be empty", key)
		}
		if _, ok := runtimeassembly.ImplNames[t.Use]; !ok {
			return fmt.Errorf("%s.use: unknown implementation %q (one of file.read, file.write, file.ls, file.str_replace, file.glob, file.grep, bash, web.fetch, web.search)", key, t.Use)
		}
	}
	for i, g := range c.ToolGroups {
		if g.Name == "" {
			return fmt.Errorf("runtime.tool_groups[%d].name: must not be empty", i)
		}
	}
	if k := c.ToolSearch.AutoPromoteTopK; k < 1 || k > 5 {
		return fmt.Errorf("runtime.tool_search.auto_promote_top_k: %d is outside 1..5", k)
	}
	if c.ToolSearch.DeferredListMax < 1 {
		return fmt.Errorf("runtime.tool_search.deferred_list_max: must be >= 1")
	}
	if l := c.ToolSearch.SearchLimit; l < 1 || l > 20 {
		return fmt.Errorf("runtime.tool_search.search_limit: %d is outside 1..20", l)
	}
	if c.ToolBounds.MaxDescriptionBytes < 256 {
		return fmt.Errorf("runtime.tool_bounds.max_description_bytes: must be >= 256")
	}
	if c.ToolBounds.MaxSchemaBytes < 1024 {
		return fmt.Errorf("runtime.tool_bounds.max_schema_bytes: must be >= 1024")
	}
	if c.ToolOutput.PreviewHeadChars < 0 || c.ToolOutput.PreviewTailChars < 0 {
		return fmt.Errorf("runtime.tool_output.preview_head_chars: head and tail must not be negative")
	}
	if m := c.ToolOutput.ExternalizeMinChars; m > 0 && m < c.ToolOutput.PreviewHeadChars+c.ToolOutput.PreviewTailChars {
		return fmt.Errorf("runtime.tool_output.externalize_min_chars: %d is below preview_head_chars + preview_tail_chars", m)
	}
	for key, d := range map[string]time.Duration{"threads": c.Retention.Threads, "runs": c.Retention.Runs, "messages": c.Retention.Messages, "artifacts": c.Retention.Artifacts} {
		if d < 0 {
			return fmt.Errorf("runtime.retention.%s: must not be negative", key)
		}
	}
	if c.Retention.SweepInterval < 0 {
		return fmt.Errorf("runtime.retention.sweep_interval: must not be negative")
	}
	if c.ToolCallTimeout < 0 {
		return fmt.Errorf("runtime.tool_call_timeout: must not be negative")
	}
	if c.RunLease < time.Second || c.RunLease > time.Hour {
		return fmt.Errorf("runtime.run_lease: %s is outside 1s..1h", c.RunLease)
	}
	if c.CacheEntries < 0 {
		return fmt.Errorf("runtime.cache_entries: must not be negative")
	}
	if c.CacheBytes < 0 {
		return fmt.Errorf("runtime.cache_bytes: must not be negative")
	}
	return nil
}

// toolSearchEnabled reports the global tool_search switch.
func (c *Config) toolSearchEnabled() bool {
	return c.ToolSearch.Enabled == nil || *c.ToolSearch.Enabled
}
