package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Base holds the sections every process has, which this package defines
// and the loader reads itself (flags, listeners, the services to run):
// server and auth. A composition root's Document embeds it.
//
// A process-wide section that is not a service's (storage, say) is added
// here: a field, an entry in entries, its defaults in setDefaults and its
// checks in validate. A section owned by another package is registered by
// the composition root instead (Document.Sections;
// docs/decisions/0020-config-sections.md).
type Base struct {
	// Server is the `server` section: listeners, data directory, limits, logging.
	Server Server
	// Auth is the `auth` section: credentials (static tokens, JWT).
	Auth Auth
}

func (b *Base) base() *Base { return b }

// entries are the base's top-level keys, in file order.
func (b *Base) entries() []entry {
	return []entry{{key: "server", ptr: &b.Server}, {key: "auth", ptr: &b.Auth}}
}

// Server is the `server` section.
type Server struct {
	// GRPCAddr is the gRPC listener, HOST:PORT (flag --grpc-addr).
	GRPCAddr string `yaml:"grpc_addr"`
	// HTTPAddr is the HTTP listener (REST gateway, /healthz, /readyz,
	// /metrics, /openapi.json), HOST:PORT (flag --http-addr).
	HTTPAddr string `yaml:"http_addr"`
	// DataDir holds one sqlite file per service and their files (flag --data-dir).
	DataDir string `yaml:"data_dir"`
	// Services selects the services of this process (flag --services).
	Services []string `yaml:"services"`
	// MaxMessageBytes is the maximum gRPC message size on servers, clients and
	// the gateway dial, in bytes.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// ShutdownTimeout bounds the graceful stop after SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainPeriod is how long health says NOT_SERVING before the stop begins.
	DrainPeriod time.Duration `yaml:"drain_period"`
	// HTTP bounds the HTTP listener's request bodies per route class and
	// configures the MCP front door's browser checks.
	HTTP HTTP `yaml:"http"`
	// RateLimits are per-principal token buckets for decision and write
	// RPCs, one entry per role ("default": principals none of whose roles
	// has one). Service credentials are not limited. An empty list turns
	// rate limiting off.
	RateLimits []RateLimit `yaml:"rate_limits"`
	// TLS of both listeners; off when cert_file is empty.
	TLS TLS `yaml:"tls"`
	// Log configures logging.
	Log Log `yaml:"log"`
}

// HTTP is `server.http`: request-body bounds per route class, checked
// before a body is parsed (docs/architecture.md §5, "Bounded cost"), and
// the MCP front door's Origin allowlist.
type HTTP struct {
	// MaxBodyBytes bounds a REST request body of any route not in a class
	// below (default 1 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ToolCallMaxBodyBytes bounds the body of the tool-call routes
	// (:executeToolCall, :executeToolCallStream, /v1/tools/{name}:call,
	// :callStream); default 4 MiB + 64 KiB, the raw_arguments bound plus
	// the envelope.
	ToolCallMaxBodyBytes int64 `yaml:"tool_call_max_body_bytes"`
	// UploadMaxBodyBytes bounds the skill-archive routes (skills:install,
	// :scan, :review, PATCH /v1/skills/{name}); default 64 MiB.
	UploadMaxBodyBytes int64 `yaml:"upload_max_body_bytes"`
	// UploadMaxInFlight caps the skill-archive requests served at once; more
	// are refused with RESOURCE_EXHAUSTED (HTTP 429) before their body is
	// read. Each costs several times its body in memory (JSON, decoded
	// archive, gRPC copies, scan), so this bounds memory; default 2.
	UploadMaxInFlight int `yaml:"upload_max_in_flight"`
	// MCPMaxBodyBytes bounds a POST body on the MCP front door (/mcp);
	// default 4 MiB + 64 KiB.
	MCPMaxBodyBytes int64 `yaml:"mcp_max_body_bytes"`
	// MCPAllowedOrigins are the browser origins (scheme://host[:port])
	// whose requests /mcp serves; a request with another Origin header is
	// 403. Default none: only clients that send no Origin.
	MCPAllowedOrigins []string `yaml:"mcp_allowed_origins"`
	// MCPMaxSessionsPerPrincipal caps the live MCP sessions one principal
	// holds on /mcp: a new one past the cap ends that principal's least
	// recently used idle session, and is 429 when all are busy. Default 16.
	MCPMaxSessionsPerPrincipal int `yaml:"mcp_max_sessions_per_principal"`
}

// RateLimit is one `server.rate_limits` entry: the token buckets of a role
// (golang.org/x/time/rate; a refused call is RESOURCE_EXHAUSTED with
// google.rpc.RetryInfo).
type RateLimit struct {
	// Role the entry applies to ("default" for every other principal).
	Role string `yaml:"role"`
	// DecisionsPerSecond refills the bucket of decision RPCs (Authorize,
	// FilterResources, AssembleTools, ExecuteToolCall(Stream), RunTurn,
	// ResumeRun, CallTool(Stream), SearchTools, ResolveSkillPolicy).
	DecisionsPerSecond float64 `yaml:"decisions_per_second"`
	// DecisionsBurst is that bucket's size.
	DecisionsBurst int `yaml:"decisions_burst"`
	// WritesPerSecond refills the bucket of write RPCs (policy, server,
	// thread, run, agent and skill changes).
	WritesPerSecond float64 `yaml:"writes_per_second"`
	// WritesBurst is that bucket's size.
	WritesBurst int `yaml:"writes_burst"`
}

// DefaultRateLimits are server.rate_limits when the key is absent.
func DefaultRateLimits() []RateLimit {
	return []RateLimit{
		{Role: "default", DecisionsPerSecond: 50, DecisionsBurst: 200, WritesPerSecond: 10, WritesBurst: 100},
		{Role: "admin", DecisionsPerSecond: 200, DecisionsBurst: 1000, WritesPerSecond: 50, WritesBurst: 500},
	}
}

// TLS configures a listener (or, in runtime.upstreams, a client).
type TLS struct {
	// CertFile is the PEM certificate (chain).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key.
	KeyFile string `yaml:"key_file"`
	// ClientCAFile, when set, requires and verifies client certificates (mTLS).
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Log configures the process logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// Auth is the `auth` section.
type Auth struct {
	// Enabled turns authentication on. Off is only allowed on loopback
	// listeners; every caller is then {local, default, [admin]}.
	Enabled bool `yaml:"enabled"`
	// Tokens are static bearer tokens, stored as SHA-256 hashes.
	Tokens []Token `yaml:"tokens"`
	// JWT configures JWT verification; off when no key file is set.
	JWT JWT `yaml:"jwt"`
	// GlobalAdminTenants lists the tenants whose admins are global admins;
	// an admin of another tenant administers only its own tenant (policy
	// lines, decisions). Default [default].
	GlobalAdminTenants []string `yaml:"global_admin_tenants"`
}

// Token is one static bearer token.
type Token struct {
	// Name identifies the token in logs.
	Name string `yaml:"name"`
	// SHA256 is the lowercase hex SHA-256 of the token (never the token itself).
	SHA256 string `yaml:"sha256"`
	// Kind is user or service.
	Kind string `yaml:"kind"`
	// Subject of the principal.
	Subject string `yaml:"subject"`
	// Tenant of the principal (default "default").
	Tenant string `yaml:"tenant"`
	// Roles of the principal.
	Roles []string `yaml:"roles"`
	// Attributes of the principal.
	Attributes map[string]string `yaml:"attributes"`
}

// JWT configures JWT bearer tokens (golang-jwt/jwt/v5).
type JWT struct {
	// HMACSecretFile holds the HS256 secret.
	HMACSecretFile string `yaml:"hmac_secret_file"`
	// PublicKeyFile holds a PEM RSA (RS256) or EC P-256 (ES256) public key.
	PublicKeyFile string `yaml:"public_key_file"`
	// Issuer, when set, must equal the `iss` claim.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be in the `aud` claim.
	Audience string `yaml:"audience"`
	// Leeway tolerates clock skew on exp/nbf/iat.
	Leeway time.Duration `yaml:"leeway"`
	// KindClaim names the claim holding the credential kind (user|service).
	KindClaim string `yaml:"kind_claim"`
	// DefaultKind applies when the kind claim is absent.
	DefaultKind string `yaml:"default_kind"`
	// TenantClaim names the tenant claim.
	TenantClaim string `yaml:"tenant_claim"`
	// RolesClaim names the roles claim (a list of strings).
	RolesClaim string `yaml:"roles_claim"`
	// AttributesClaim names a claim holding a string map of attributes.
	AttributesClaim string `yaml:"attributes_claim"`
}

// Enabled reports whether JWTs are accepted.
func (j JWT) Enabled() bool { return j.HMACSecretFile != "" || j.PublicKeyFile != "" }

// setDefaults fills the base's unset fields; services is Document.Services.
func (b *Base) setDefaults(services []string) {
	s := &b.Server
	if s.GRPCAddr == "" {
		s.GRPCAddr = "127.0.0.1:7420"
	}
	if s.HTTPAddr == "" {
		s.HTTPAddr = "127.0.0.1:7421"
	}
	if s.DataDir == "" {
		s.DataDir = "./data"
	}
	if s.Services == nil {
		s.Services = slices.Clone(services)
	}
	if s.MaxMessageBytes == 0 {
		s.MaxMessageBytes = 64 << 20
	}
	if s.RateLimits == nil {
		s.RateLimits = DefaultRateLimits()
	}
	if s.HTTP.MaxBodyBytes == 0 {
		s.HTTP.MaxBodyBytes = 1 << 20
	}
	if s.HTTP.ToolCallMaxBodyBytes == 0 {
		s.HTTP.ToolCallMaxBodyBytes = 4<<20 + 64<<10
	}
	if s.HTTP.UploadMaxBodyBytes == 0 {
		s.HTTP.UploadMaxBodyBytes = 64 << 20
	}
	if s.HTTP.MCPMaxBodyBytes == 0 {
		s.HTTP.MCPMaxBodyBytes = 4<<20 + 64<<10
	}
	if s.HTTP.UploadMaxInFlight == 0 {
		s.HTTP.UploadMaxInFlight = 2
	}
	if s.HTTP.MCPMaxSessionsPerPrincipal == 0 {
		s.HTTP.MCPMaxSessionsPerPrincipal = 16
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = 30 * time.Second
	}
	if s.DrainPeriod == 0 {
		s.DrainPeriod = 500 * time.Millisecond
	}
	if s.Log.Level == "" {
		s.Log.Level = "info"
	}
	if s.Log.Format == "" {
		s.Log.Format = "text"
	}
	j := &b.Auth.JWT
	if j.KindClaim == "" {
		j.KindClaim = "toolplane_kind"
	}
	if j.DefaultKind == "" {
		j.DefaultKind = "user"
	}
	if j.TenantClaim == "" {
		j.TenantClaim = "tenant"
	}
	if j.RolesClaim == "" {
		j.RolesClaim = "roles"
	}
	if j.AttributesClaim == "" {
		j.AttributesClaim = "attributes"
	}
	if j.Leeway == 0 {
		j.Leeway = 30 * time.Second
	}
	if b.Auth.GlobalAdminTenants == nil {
		b.Auth.GlobalAdminTenants = []string{"default"}
	}
	for i := range b.Auth.Tokens {
		if b.Auth.Tokens[i].Tenant == "" {
			b.Auth.Tokens[i].Tenant = "default"
		}
	}
}

// validate checks the base sections; services is Document.Services (the
// allowed values of server.services).
func (b *Base) validate(services []string) error {
	s := b.Server
	if err := ValidateAddr(s.GRPCAddr); err != nil {
		return errf("server.grpc_addr", "%v", err)
	}
	if err := ValidateAddr(s.HTTPAddr); err != nil {
		return errf("server.http_addr", "%v", err)
	}
	if s.GRPCAddr == s.HTTPAddr {
		return errf("server.http_addr", "must differ from server.grpc_addr (%s)", s.GRPCAddr)
	}
	if len(s.Services) == 0 {
		return errf("server.services", "at least one of %s", strings.Join(services, ", "))
	}
	seen := map[string]bool{}
	for _, name := range s.Services {
		if !slices.Contains(services, name) {
			return errf("server.services", "unknown service %q (want a subset of %s)", name, strings.Join(services, ","))
		}
		if seen[name] {
			return errf("server.services", "service %q listed twice", name)
		}
		seen[name] = true
	}
	if s.MaxMessageBytes < 1<<20 || s.MaxMessageBytes > 1<<30 {
		return errf("server.max_message_bytes", "must be between 1 MiB and 1 GiB, got %d", s.MaxMessageBytes)
	}
	for key, v := range map[string]int64{"max_body_bytes": s.HTTP.MaxBodyBytes, "tool_call_max_body_bytes": s.HTTP.ToolCallMaxBodyBytes,
		"upload_max_body_bytes": s.HTTP.UploadMaxBodyBytes, "mcp_max_body_bytes": s.HTTP.MCPMaxBodyBytes} {
		if v < 1<<10 || v > 1<<30 {
			return errf("server.http."+key, "must be between 1 KiB and 1 GiB, got %d", v)
		}
	}
	if s.HTTP.MCPMaxSessionsPerPrincipal < 1 || s.HTTP.MCPMaxSessionsPerPrincipal > 65536 {
		return errf("server.http.mcp_max_sessions_per_principal", "must be between 1 and 65536, got %d", s.HTTP.MCPMaxSessionsPerPrincipal)
	}
	if s.HTTP.UploadMaxInFlight < 1 || s.HTTP.UploadMaxInFlight > 1024 {
		return errf("server.http.upload_max_in_flight", "must be between 1 and 1024, got %d", s.HTTP.UploadMaxInFlight)
	}
	roles := map[string]bool{}
	for i, r := range s.RateLimits {
		key := fmt.Sprintf("server.rate_limits[%d]", i)
		switch {
		case r.Role == "":
			return errf(key+".role", "must not be empty")
		case roles[r.Role]:
			return errf(key+".role", "role %q listed twice", r.Role)
		case r.DecisionsPerSecond <= 0 || r.DecisionsBurst < 1:
			return errf(key+".decisions_per_second", "decisions_per_second must be positive and decisions_burst at least 1")
		case r.WritesPerSecond <= 0 || r.WritesBurst < 1:
			return errf(key+".writes_per_second", "writes_per_second must be positive and writes_burst at least 1")
		}
		roles[r.Role] = true
	}
	for i, o := range s.HTTP.MCPAllowedOrigins {
		if !strings.Contains(o, "://") || strings.HasSuffix(o, "/") || o != strings.TrimSpace(o) {
			return errf(fmt.Sprintf("server.http.mcp_allowed_origins[%d]", i), "%q must be an origin, scheme://host[:port] without a path", o)
		}
	}
	if s.ShutdownTimeout < 0 {
		return errf("server.shutdown_timeout", "must not be negative")
	}
	if s.DrainPeriod < 0 {
		return errf("server.drain_period", "must not be negative")
	}
	if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
		return errf("server.tls", "cert_file and key_file must be set together")
	}
	if s.TLS.ClientCAFile != "" && !s.TLS.Enabled() {
		return errf("server.tls.client_ca_file", "needs cert_file and key_file")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, s.Log.Level) {
		return errf("server.log.level", "must be debug, info, warn or error, got %q", s.Log.Level)
	}
	if s.Log.Format != "text" && s.Log.Format != "json" {
		return errf("server.log.format", "must be text or json, got %q", s.Log.Format)
	}
	if !b.Auth.Enabled {
		for _, a := range []struct{ key, addr string }{{"server.grpc_addr", s.GRPCAddr}, {"server.http_addr", s.HTTPAddr}} {
			if !IsLoopback(a.addr) {
				return errf(a.key, "listening on non-loopback address %s with authentication off is refused; set auth.enabled: true", a.addr)
			}
		}
	}
	names := map[string]bool{}
	for i, t := range b.Auth.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if len(t.SHA256) != 64 || strings.ToLower(t.SHA256) != t.SHA256 || !isHex(t.SHA256) {
			return errf(key+".sha256", "must be the 64-character lowercase hex SHA-256 of the token")
		}
		if t.Kind != "user" && t.Kind != "service" {
			return errf(key+".kind", "must be user or service, got %q", t.Kind)
		}
		if t.Subject == "" {
			return errf(key+".subject", "must not be empty")
		}
		if t.Name != "" && names[t.Name] {
			return errf(key+".name", "duplicate token name %q", t.Name)
		}
		names[t.Name] = true
	}
	// A process serving only some services is reached by other processes,
	// which need a credential it accepts.
	if b.Auth.Enabled && len(b.Auth.Tokens) == 0 && !b.Auth.JWT.Enabled() && len(s.Services) != len(services) {
		return errf("auth", "enabled, but no tokens and no JWT key are configured: nobody could call this process")
	}
	j := b.Auth.JWT
	if j.HMACSecretFile != "" && j.PublicKeyFile != "" {
		return errf("auth.jwt", "set hmac_secret_file or public_key_file, not both")
	}
	if j.DefaultKind != "user" && j.DefaultKind != "service" {
		return errf("auth.jwt.default_kind", "must be user or service, got %q", j.DefaultKind)
	}
	return nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
