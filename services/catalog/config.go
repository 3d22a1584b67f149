package catalog

import (
	"fmt"
	"slices"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Config is the `catalog` section of toolplane.yaml. Every key is documented,
// with its default, in toolplane.example.yaml.
type Config struct {
	// ExtensionsConfig is the path of extensions_config.json (the MCP server
	// list, deerflow-reference §5.1); relative paths are resolved against the
	// working directory. A missing file is an empty server list; writes
	// create it. Default "extensions_config.json".
	ExtensionsConfig string `yaml:"extensions_config"`
	// StdioAllowlist is the set of executables a stdio server written through
	// the API may use. Default [npx, uvx, node, python3].
	StdioAllowlist []string `yaml:"stdio_allowlist"`
	// DefaultToolCallTimeout applies when neither the request nor the server
	// sets one. Default 60s.
	DefaultToolCallTimeout time.Duration `yaml:"default_tool_call_timeout"`
	// ReloadInterval is how often extensions_config.json is checked for a
	// content change (applied within this interval plus discovery). Default 500ms.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// CloseGrace bounds each step of stopping a stdio child (stdin close,
	// SIGTERM, SIGKILL). Default 2s.
	CloseGrace time.Duration `yaml:"close_grace"`
	// Sessions configures per_user / per_thread children.
	Sessions SessionsConfig `yaml:"sessions"`
	// Search configures SearchTools.
	Search SearchConfig `yaml:"search"`
}

// SessionsConfig configures the LRU of per-scope MCP children.
type SessionsConfig struct {
	// MaxScoped is the LRU cap of per-user/per-thread children. Default 32.
	MaxScoped int `yaml:"max_scoped"`
	// IdleTTL closes a per-scope child idle this long. Default 10m.
	IdleTTL time.Duration `yaml:"idle_ttl"`
}

// SearchConfig configures SearchTools.
type SearchConfig struct {
	// DefaultLimit is the number of hits when the request sets none. Default 5.
	DefaultLimit int `yaml:"default_limit"`
	// MaxLimitNonService caps `limit` for callers that are not services. Default 5.
	MaxLimitNonService int `yaml:"max_limit_non_service"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.ExtensionsConfig == "" {
		c.ExtensionsConfig = "extensions_config.json"
	}
	if c.StdioAllowlist == nil {
		c.StdioAllowlist = slices.Clone(catalogconfig.DefaultCommandAllowlist)
	}
	if c.DefaultToolCallTimeout == 0 {
		c.DefaultToolCallTimeout = 60 * time.Second
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = 500 * time.Millisecond
	}
	if c.CloseGrace == 0 {
		c.CloseGrace = 2 * time.Second
	}
	if c.Sessions.MaxScoped == 0 {
		c.Sessions.MaxScoped = 32
	}
	if c.Sessions.IdleTTL == 0 {
		c.Sessions.IdleTTL = 10 * time.Minute
	}
	if c.Search.DefaultLimit == 0 {
		c.Search.DefaultLimit = 5
	}
	if c.Search.MaxLimitNonService == 0 {
		c.Search.MaxLimitNonService = 5
	}
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	for i, cmd := range c.StdioAllowlist {
		probe := catalogconfig.Server{Name: "probe", Command: cmd}
		if err := catalogconfig.ValidateCommand(&probe, []string{cmd}); err != nil || cmd == "" {
			return fmt.Errorf("catalog.stdio_allowlist[%d]: %q must be a bare executable name", i, cmd)
		}
	}
	checks := []struct {
		ok   bool
		path string
		msg  string
	}{
		{c.DefaultToolCallTimeout > 0, "catalog.default_tool_call_timeout", "must be > 0"},
		{c.ReloadInterval >= 50*time.Millisecond, "catalog.reload_interval", "must be >= 50ms"},
		{c.CloseGrace > 0, "catalog.close_grace", "must be > 0"},
		{c.Sessions.MaxScoped >= 1, "catalog.sessions.max_scoped", "must be >= 1"},
		{c.Sessions.IdleTTL > 0, "catalog.sessions.idle_ttl", "must be > 0"},
		{c.Search.DefaultLimit >= 1, "catalog.search.default_limit", "must be >= 1"},
		{c.Search.MaxLimitNonService >= 1, "catalog.search.max_limit_non_service", "must be >= 1"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("%s: %s", ch.path, ch.msg)
		}
	}
	return nil
}
