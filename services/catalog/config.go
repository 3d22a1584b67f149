package catalog

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane/internal/egress"
	"github.com/toolplane/toolplane/services/catalog/catalogacp"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Config is the `catalog` section of toolplane.yaml. Every key is documented,
// with its default, in toolplane.example.yaml.
type Config struct {
	// ExtensionsConfig is the path of extensions_config.json (the MCP server
	// list, docs/deerflow.md §5.1); relative paths are resolved against the
	// working directory. A missing file is an empty server list; writes
	// create it. With storage.dsn set the database holds the servers: the
	// replica holding the advisory lock catalog.file_import imports this
	// file, and API writes go to the database, not to the file
	// (docs/decisions/0087-catalog-config-in-postgresql.md).
	// Default "extensions_config.json".
	ExtensionsConfig string `yaml:"extensions_config"`
	// StdioAllowlist is the set of executables a stdio server written through
	// the API may use. Default [npx, uvx, node, python3].
	StdioAllowlist []string `yaml:"stdio_allowlist"`
	// DefaultToolCallTimeout applies when neither the request nor the server
	// sets one. Default 60s.
	DefaultToolCallTimeout time.Duration `yaml:"default_tool_call_timeout"`
	// ReloadInterval is how often extensions_config.json is checked for a
	// content change (applied within this interval plus discovery) and, with
	// storage.dsn set, the version of the stored configuration (the
	// fallback of LISTEN/NOTIFY). Default 500ms.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// CloseGrace bounds each step of stopping a stdio child (stdin close,
	// SIGTERM, SIGKILL). Default 2s.
	CloseGrace time.Duration `yaml:"close_grace"`
	// ReadyRequires says what the catalog's readiness (gRPC health, /readyz)
	// waits for at start: "none" (ready once the configuration is loaded;
	// servers come up in the background), "any" (also one enabled server
	// READY, or every enabled server past its first connection attempt) or
	// "all" (every enabled server past its first attempt: READY or FAILED,
	// none CONNECTING). Once ready the catalog stays ready: restarts and
	// reloads do not withdraw it (docs/decisions/0071-catalog-ready-requires.md).
	// Default "none".
	ReadyRequires string `yaml:"ready_requires"`
	// FileCommandPolicy applies the stdio command policy (stdio_allowlist
	// and the refused argument patterns, docs/architecture.md §10.4) to the
	// servers of extensions_config.json too, not only to API writes: a
	// refused server is FAILED with the reason and never started; and to
	// catalog.acp_agents: a refused agent stops the catalog at start, the
	// error naming the field.
	// "enforce" or "off" (the operator's own local binaries by path).
	// Default "enforce".
	FileCommandPolicy string `yaml:"file_command_policy"`
	// StaticDirs are the directories a static server written through the
	// API (UpdateServer, ReplaceServers) may read its `path` from; a path
	// outside them, also through a symlink or `..`, is refused naming
	// mcpServers.<name>.path. Default: the directory of extensions_config.
	// The file's own servers are the operator's and are not confined.
	StaticDirs []string `yaml:"static_dirs"`
	// NameRetention is how long the exposed name of a (server, tool) pair no
	// longer in the catalog stays assigned to it, so a returning server gets
	// its names back (docs/architecture.md §7). Default 720h (30 days).
	NameRetention time.Duration `yaml:"name_retention"`
	// MaxNamesPerServer caps the stored name assignments (present and
	// retained) of one server, so a server that keeps inventing tool names
	// cannot grow tool_names without bound: the oldest retained ones are
	// evicted first (logged); names of present tools beyond the cap are
	// served but not recorded. Default 10000.
	MaxNamesPerServer int `yaml:"max_names_per_server"`
	// MaxDefinitionBytes bounds one tool definition as listed (the whole
	// tools/list object); a larger tool is left out and reported on its
	// server (Server.omitted_tools). Default 1048576 (1 MiB); at most a
	// quarter of the maximum message size.
	MaxDefinitionBytes int `yaml:"max_definition_bytes"`
	// Pin is the default of the per-server `pin` key: pin tool definitions,
	// a changed definition waits for an admin's approval (docs/architecture.md §7).
	// Default false.
	Pin bool `yaml:"pin"`
	// PinNewTools is the default of the per-server `pin_new_tools` key:
	// allow (a new tool of a pinned server is pinned as first seen) or
	// review (it is PENDING until approved). Default allow.
	PinNewTools string `yaml:"pin_new_tools"`
	// DefinitionChurn is the stability guard for tool definitions that
	// change on every list (churn.go).
	DefinitionChurn ChurnConfig `yaml:"definition_churn"`
	// Sessions configures per_user / per_thread children.
	Sessions SessionsConfig `yaml:"sessions"`
	// TenantAdmins bounds what one tenant admin may own (tenantlimits.go).
	TenantAdmins TenantAdminsConfig `yaml:"tenant_admins"`
	// Egress is the network policy of sse/http MCP servers (internal/egress):
	// loopback, private, link-local and metadata addresses are refused
	// unless listed in egress.allow — checked when a server is written
	// through the API (after DNS resolution), at every dial and on every
	// redirect.
	Egress EgressConfig `yaml:"egress"`
	// Search configures SearchTools.
	Search SearchConfig `yaml:"search"`
	// OAuth configures OAuth to upstream MCP servers (oauth.go).
	OAuth OAuthConfig `yaml:"oauth"`
	// ACPAgents are the ACP agents (DeerFlow's `acp_agents`: command, args,
	// env with $VAR from the host, description, model, auto_approve_permissions),
	// run per thread in its ACP workspace
	// (docs/decisions/0150-where-acp-and-workspace-servers-run.md). Default none.
	ACPAgents map[string]catalogacp.Agent `yaml:"acp_agents"`
	// Workspaces locates the runtime's thread folders.
	Workspaces WorkspacesConfig `yaml:"workspaces"`
	// Placement places `stateful: true` servers on one replica among
	// several on one PostgreSQL database (placement.go).
	Placement PlacementConfig `yaml:"placement"`
}

// PlacementConfig configures the replica membership that places
// `stateful: true` servers (docs/decisions/0086-session-placement.md).
// Used only with storage.dsn; on sqlite every server runs in the process.
type PlacementConfig struct {
	// AdvertiseAddress is this replica's gRPC address as the runtime dials
	// it: exactly one entry of runtime.upstreams.catalog.address (or the
	// pod's address:port of a headless Service), since both sides hash
	// the same strings. "" = no placement: this replica runs every
	// stateful server itself (one catalog replica). Default "".
	AdvertiseAddress string `yaml:"advertise_address"`
	// Heartbeat is how often the replica refreshes its membership and
	// re-evaluates which stateful servers it runs. Default 2s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// MemberTimeout is how long a silent replica stays a member: its
	// stateful servers move to the next replica this long (plus a
	// heartbeat) after it died. Default 10s; at least 3 heartbeats.
	MemberTimeout time.Duration `yaml:"member_timeout"`
}

// ChurnConfig is catalog.definition_churn: a tool of an unpinned server
// whose definition changed Changes times within Window is bound with its
// last stable title and description (never older annotations or schemas)
// until it stays unchanged for Settle
// (docs/decisions/0097-definition-churn-guard.md).
type ChurnConfig struct {
	// Changes is how many definition changes within Window make a tool
	// churning. Default 2; -1 turns the guard off.
	Changes int `yaml:"changes"`
	// Window is the period the changes are counted over. Default 10m.
	Window time.Duration `yaml:"window"`
	// Settle is how long a churning tool's definition must stay unchanged
	// before it is bound. Default 2m.
	Settle time.Duration `yaml:"settle"`
}

// WorkspacesConfig locates the runtime's thread folders on the catalog's
// volume (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
type WorkspacesConfig struct {
	// Dir holds one folder per thread. Default "" = <data dir>/runtime/threads,
	// the runtime's own folder in one process; in a split deployment, where
	// the shared volume is mounted into the catalog.
	Dir string `yaml:"dir"`
}

// Values of Config.ReadyRequires.
const (
	ReadyNone = "none"
	ReadyAny  = "any"
	ReadyAll  = "all"
)

// SessionsConfig configures the pool of per-scope MCP children
// (docs/architecture.md §10.3, docs/decisions/0138-fair-scoped-session-eviction.md).
type SessionsConfig struct {
	// MaxScoped caps the per-tenant/per-user/per-thread children of every
	// server and tenant together. Beyond it the least recently used idle
	// child of the tenant holding the most is closed. Default 32.
	MaxScoped int `yaml:"max_scoped"`
	// MaxScopedPerTenant caps one tenant's children: at the cap a tenant's
	// new child replaces its own least recently used idle one, and is
	// refused (RESOURCE_EXHAUSTED) when all are in use. Default 0 = no
	// per-tenant cap (fair eviction only).
	MaxScopedPerTenant int `yaml:"max_scoped_per_tenant"`
	// IdleTTL closes a per-scope child idle this long. Default 10m.
	IdleTTL time.Duration `yaml:"idle_ttl"`
}

// TenantAdminsConfig bounds the servers of one tenant admin
// (docs/decisions/0138-fair-scoped-session-eviction.md, "Servers per tenant").
type TenantAdminsConfig struct {
	// MaxServers is the number of servers a tenant admin's ReplaceServers
	// may leave its tenant owning; more is refused naming `servers`.
	// Global admins are not bounded by it. Default 50.
	MaxServers int `yaml:"max_servers"`
}

// SearchConfig configures SearchTools.
type SearchConfig struct {
	// DefaultLimit is the number of hits when the request sets none. Default 5.
	DefaultLimit int `yaml:"default_limit"`
	// MaxLimitNonService caps `limit` for callers that are not services. Default 5.
	MaxLimitNonService int `yaml:"max_limit_non_service"`
	// ViewCacheBytes bounds the candidate views of SearchTools (the sets a
	// service caller searches by id; docs/decisions/0144-candidate-views.md).
	// Default 16 MiB.
	ViewCacheBytes int64 `yaml:"view_cache_bytes"`
	// Embedder plugs an OpenAI-compatible embeddings endpoint into SEMANTIC
	// and AUTO ranking (docs/search.md; docs/decisions/0007-auto-fusion.md). An empty URL keeps the
	// built-in static word vectors (no network).
	Embedder EmbedderConfig `yaml:"embedder"`
}

// EmbedderConfig configures the remote embedder of SearchTools
// (search.HTTPEmbedderConfig). Tool vectors are cached by content hash in
// DataDir/catalog.db, so a restart re-requests only changed tools.
type EmbedderConfig struct {
	// URL is the full endpoint, e.g. "https://host/v1/embeddings" (POST,
	// OpenAI request/response shape). "" = built-in static vectors. Default "".
	URL string `yaml:"url"`
	// Model is sent as "model" and is part of every cache key, so changing it
	// re-embeds everything. Required when URL is set. Default "".
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the bearer token sent
	// as "Authorization: Bearer <key>"; "" sends none. When set, the variable
	// must be non-empty at start. Default "".
	APIKeyEnv string `yaml:"api_key_env"`
	// Dimensions, when > 0, is sent as "dimensions" and every returned vector
	// must have exactly this length; 0 accepts the model's own length. Default 0.
	Dimensions int `yaml:"dimensions"`
	// BatchSize caps texts per request. Default 64.
	BatchSize int `yaml:"batch_size"`
	// Timeout bounds one HTTP request. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
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
	if c.ReadyRequires == "" {
		c.ReadyRequires = ReadyNone
	}
	if c.Egress.Allow == nil {
		c.Egress.Allow = []string{}
	}
	if c.Egress.MaxResponseBytes == 0 {
		c.Egress.MaxResponseBytes = 16 << 20
	}
	if c.Egress.DialTimeout == 0 {
		c.Egress.DialTimeout = 10 * time.Second
	}
	if c.FileCommandPolicy == "" {
		c.FileCommandPolicy = "enforce"
	}
	if c.NameRetention == 0 {
		c.NameRetention = 30 * 24 * time.Hour
	}
	if c.MaxNamesPerServer == 0 {
		c.MaxNamesPerServer = 10000
	}
	if c.MaxDefinitionBytes == 0 {
		c.MaxDefinitionBytes = 1 << 20
	}
	if c.DefinitionChurn.Changes == 0 {
		c.DefinitionChurn.Changes = 2
	}
	if c.DefinitionChurn.Window == 0 {
		c.DefinitionChurn.Window = 10 * time.Minute
	}
	if c.DefinitionChurn.Settle == 0 {
		c.DefinitionChurn.Settle = 2 * time.Minute
	}
	if c.PinNewTools == "" {
		c.PinNewTools = catalogconfig.PinNewAllow
	}
	if c.Sessions.MaxScoped == 0 {
		c.Sessions.MaxScoped = 32
	}
	if c.TenantAdmins.MaxServers == 0 {
		c.TenantAdmins.MaxServers = 50
	}
	if c.Sessions.IdleTTL == 0 {
		c.Sessions.IdleTTL = 10 * time.Minute
	}
	if c.Search.DefaultLimit == 0 {
		c.Search.DefaultLimit = 5
	}
	if c.Placement.Heartbeat == 0 {
		c.Placement.Heartbeat = 2 * time.Second
	}
	if c.Placement.MemberTimeout == 0 {
		c.Placement.MemberTimeout = 10 * time.Second
	}
	if c.Search.MaxLimitNonService == 0 {
		c.Search.MaxLimitNonService = 5
	}
	if c.Search.ViewCacheBytes == 0 {
		c.Search.ViewCacheBytes = 16 << 20
	}
	if c.Search.Embedder.BatchSize == 0 {
		c.Search.Embedder.BatchSize = 64
	}
	if c.Search.Embedder.Timeout == 0 {
		c.Search.Embedder.Timeout = 30 * time.Second
	}
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	if _, err := egress.ParsePrefixes("catalog.egress.allow", c.Egress.Allow); err != nil {
		return err
	}
	if c.Egress.MaxResponseBytes < 1024 {
		return fmt.Errorf("catalog.egress.max_response_bytes: must be >= 1024, got %d", c.Egress.MaxResponseBytes)
	}
	if c.Egress.DialTimeout < 100*time.Millisecond {
		return fmt.Errorf("catalog.egress.dial_timeout: must be >= 100ms, got %s", c.Egress.DialTimeout)
	}
	if c.FileCommandPolicy != "enforce" && c.FileCommandPolicy != "off" {
		return fmt.Errorf("catalog.file_command_policy: %q: want enforce or off", c.FileCommandPolicy)
	}
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
		{c.NameRetention >= time.Hour, "catalog.name_retention", "must be >= 1h"},
		{c.MaxNamesPerServer >= 1, "catalog.max_names_per_server", "must be >= 1"},
		{c.MaxDefinitionBytes >= 1024, "catalog.max_definition_bytes", "must be >= 1024"},
		{c.DefinitionChurn.Changes == -1 || c.DefinitionChurn.Changes >= 2, "catalog.definition_churn.changes", "must be >= 2, or -1 (off)"},
		{c.DefinitionChurn.Window > 0, "catalog.definition_churn.window", "must be > 0"},
		{c.DefinitionChurn.Settle > 0, "catalog.definition_churn.settle", "must be > 0"},
		{c.PinNewTools == catalogconfig.PinNewAllow || c.PinNewTools == catalogconfig.PinNewReview, "catalog.pin_new_tools", "must be allow or review"},
		{c.Sessions.MaxScoped >= 1, "catalog.sessions.max_scoped", "must be >= 1"},
		{c.Sessions.MaxScopedPerTenant >= 0, "catalog.sessions.max_scoped_per_tenant", "must be >= 0 (0 = no per-tenant cap)"},
		{c.Sessions.IdleTTL > 0, "catalog.sessions.idle_ttl", "must be > 0"},
		{c.TenantAdmins.MaxServers >= 1, "catalog.tenant_admins.max_servers", "must be >= 1"},
		{c.Search.DefaultLimit >= 1, "catalog.search.default_limit", "must be >= 1"},
		{c.Search.MaxLimitNonService >= 1, "catalog.search.max_limit_non_service", "must be >= 1"},
		{c.Search.ViewCacheBytes >= 1<<16, "catalog.search.view_cache_bytes", "must be >= 65536"},
		{c.Placement.Heartbeat >= 50*time.Millisecond, "catalog.placement.heartbeat", "must be >= 50ms"},
		{c.Placement.MemberTimeout >= 3*c.Placement.Heartbeat, "catalog.placement.member_timeout", "must be at least 3 heartbeats"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("%s: %s", ch.path, ch.msg)
		}
	}
	if a := c.Placement.AdvertiseAddress; a != "" {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" || strings.Contains(a, "://") {
			return fmt.Errorf("catalog.placement.advertise_address: %q is not host:port", a)
		}
	}
	switch c.ReadyRequires {
	case ReadyNone, ReadyAny, ReadyAll:
	default:
		return fmt.Errorf("catalog.ready_requires: %q is not one of none, any, all", c.ReadyRequires)
	}
	if err := c.OAuth.validate("catalog.oauth"); err != nil {
		return err
	}
	if err := catalogacp.ValidateAgents("catalog.acp_agents", c.ACPAgents); err != nil {
		return err
	}
	return c.Search.Embedder.validate("catalog.search.embedder")
}

// validate checks the embedder section; p is its key path.
func (e *EmbedderConfig) validate(p string) error {
	if e.URL == "" {
		if e.Model != "" || e.APIKeyEnv != "" {
			return fmt.Errorf("%s.url: required when model or api_key_env is set", p)
		}
	} else {
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: must be an absolute http(s) URL, got %q", p, e.URL)
		}
		if u.User != nil {
			return fmt.Errorf("%s.url: must not carry credentials (use api_key_env)", p)
		}
		if strings.TrimSpace(e.Model) == "" {
			return fmt.Errorf("%s.model: required when url is set", p)
		}
	}
	if e.APIKeyEnv != "" && !envName.MatchString(e.APIKeyEnv) {
		return fmt.Errorf("%s.api_key_env: %q is not an environment variable name", p, e.APIKeyEnv)
	}
	checks := []struct {
		ok       bool
		key, msg string
	}{
		{e.Dimensions >= 0, "dimensions", "must be >= 0"},
		{e.BatchSize >= 1 && e.BatchSize <= 2048, "batch_size", "must be between 1 and 2048"},
		{e.Timeout > 0, "timeout", "must be > 0"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("%s.%s: %s", p, ch.key, ch.msg)
		}
	}
	return nil
}

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// EgressConfig is catalog.egress (docs/architecture.md §10.5, internal/egress).
type EgressConfig struct {
	// Allow lists CIDR prefixes or addresses reachable although they are
	// loopback, private, link-local or reserved (e.g. 127.0.0.0/8 for local
	// MCP servers). Only the configuration (a global admin) sets it. Default [].
	Allow []string `yaml:"allow"`
	// MaxResponseBytes bounds one non-streaming HTTP response of an MCP
	// server (SSE streams are bounded per message by the MCP client).
	// Default 16777216 (16 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// DialTimeout bounds one connection attempt (and TLS handshake and
	// response headers). Default 10s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
}

// policy builds the egress policy (Validate checked Allow).
func (e EgressConfig) policy() *egress.Policy {
	allow, _ := egress.ParsePrefixes("catalog.egress.allow", e.Allow)
	return &egress.Policy{Allow: allow, MaxResponseBytes: e.MaxResponseBytes, DialTimeout: e.DialTimeout, Timeout: e.DialTimeout}
}
