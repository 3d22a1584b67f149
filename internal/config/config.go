// Package config loads toolplane.yaml into one typed struct with the
// precedence flags > environment (TOOLPLANE_<SECTION>_<KEY>) > file >
// defaults, rejects unknown keys with their path, and validates everything
// before anything listens (ARCHITECTURE §4).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/services/authz"
	"github.com/toolplane/toolplane/services/catalog"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/skills"
)

// AllServices lists the services in start order (ARCHITECTURE §1, STYLE §4).
var AllServices = []string{"catalog", "authz", "skills", "runtime"}

// Config is the whole toolplane.yaml.
type Config struct {
	// Server holds listeners, data directory, limits and logging.
	Server Server `yaml:"server"`
	// Auth holds credentials (static tokens, JWT).
	Auth Auth `yaml:"auth"`
	// Catalog is the catalog service's section.
	Catalog catalog.Config `yaml:"catalog"`
	// Authz is the authz service's section.
	Authz authz.Config `yaml:"authz"`
	// Skills is the skills service's section.
	Skills skills.Config `yaml:"skills"`
	// Runtime is the runtime service's section.
	Runtime runtime.Config `yaml:"runtime"`
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
	// TLS of both listeners; off when cert_file is empty.
	TLS TLS `yaml:"tls"`
	// Log configures logging.
	Log Log `yaml:"log"`
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

// Default returns the configuration with every default filled in.
func Default() Config {
	c := Config{}
	c.SetDefaults()
	return c
}

// SetDefaults fills unset fields with their defaults, section by section.
func (c *Config) SetDefaults() {
	s := &c.Server
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
		s.Services = slices.Clone(AllServices)
	}
	if s.MaxMessageBytes == 0 {
		s.MaxMessageBytes = 64 << 20
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
	j := &c.Auth.JWT
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
	for i := range c.Auth.Tokens {
		if c.Auth.Tokens[i].Tenant == "" {
			c.Auth.Tokens[i].Tenant = "default"
		}
	}
	c.Catalog.SetDefaults()
	c.Authz.SetDefaults()
	c.Skills.SetDefaults()
	c.Runtime.SetDefaults()
}

// Error is a configuration error naming the key (or flag) and the reason; the
// binary prints it on one line and exits 2.
type Error struct {
	// Key is the key path ("server.grpc_addr") or flag ("--grpc-addr").
	Key string
	// Reason says what is wrong.
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("config: %s: %s", e.Key, e.Reason) }

func errf(key, format string, args ...any) error {
	return &Error{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks the whole configuration; the first problem is returned as
// an *Error. It does not touch the network or the file system.
func (c *Config) Validate() error {
	s := c.Server
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
		return errf("server.services", "at least one of %s", strings.Join(AllServices, ", "))
	}
	seen := map[string]bool{}
	for _, name := range s.Services {
		if !slices.Contains(AllServices, name) {
			return errf("server.services", "unknown service %q (want a subset of %s)", name, strings.Join(AllServices, ","))
		}
		if seen[name] {
			return errf("server.services", "service %q listed twice", name)
		}
		seen[name] = true
	}
	if s.MaxMessageBytes < 1<<20 || s.MaxMessageBytes > 1<<30 {
		return errf("server.max_message_bytes", "must be between 1 MiB and 1 GiB, got %d", s.MaxMessageBytes)
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
	if !c.Auth.Enabled {
		for _, a := range []struct{ key, addr string }{{"server.grpc_addr", s.GRPCAddr}, {"server.http_addr", s.HTTPAddr}} {
			if !IsLoopback(a.addr) {
				return errf(a.key, "listening on non-loopback address %s with authentication off is refused; set auth.enabled: true", a.addr)
			}
		}
	}
	names := map[string]bool{}
	for i, t := range c.Auth.Tokens {
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
	if c.Auth.Enabled && len(c.Auth.Tokens) == 0 && !c.Auth.JWT.Enabled() && len(s.Services) != len(AllServices) {
		return errf("auth", "enabled, but no tokens and no JWT key are configured: nobody could call this process")
	}
	j := c.Auth.JWT
	if j.HMACSecretFile != "" && j.PublicKeyFile != "" {
		return errf("auth.jwt", "set hmac_secret_file or public_key_file, not both")
	}
	if j.DefaultKind != "user" && j.DefaultKind != "service" {
		return errf("auth.jwt.default_kind", "must be user or service, got %q", j.DefaultKind)
	}
	if err := c.Catalog.Validate(); err != nil {
		return sectionErr("catalog", err)
	}
	if err := c.Authz.Validate(); err != nil {
		return sectionErr("authz", err)
	}
	if err := c.Skills.Validate(); err != nil {
		return sectionErr("skills", err)
	}
	if err := c.Runtime.Validate(); err != nil {
		return sectionErr("runtime", err)
	}
	if seen["runtime"] {
		for _, up := range []string{"catalog", "authz", "skills"} {
			if !seen[up] && c.Runtime.Upstream(up).Address == "" {
				return errf("runtime.upstreams."+up+".address", "required when %s is not served by this process", up)
			}
		}
	}
	return nil
}

func sectionErr(section string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	msg := err.Error()
	if strings.HasPrefix(msg, section+".") {
		if k, r, ok := strings.Cut(msg, ": "); ok {
			return &Error{Key: k, Reason: r}
		}
	}
	return &Error{Key: section, Reason: msg}
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// ValidateAddr checks a HOST:PORT listen address (port 0..65535; host may be empty).
func ValidateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("malformed address %q: want HOST:PORT", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("malformed address %q: port must be a number 0..65535", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("malformed address %q: bad host", addr)
	}
	return nil
}

// IsLoopback reports whether a listen address binds only loopback interfaces.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Flags are the command-line overrides of `toolplane serve`; nil = not given.
type Flags struct {
	ConfigFile       string
	ExtensionsConfig *string
	DataDir          *string
	GRPCAddr         *string
	HTTPAddr         *string
	Services         *string
}

// Load reads the file (if any), applies the environment and the flags over
// the defaults and validates the result.
func Load(f Flags, environ []string) (*Config, error) {
	var c Config
	if f.ConfigFile != "" {
		data, err := os.ReadFile(f.ConfigFile)
		if err != nil {
			return nil, errf("--config", "%v", err)
		}
		if err := Decode(data, &c); err != nil {
			return nil, err
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return nil, err
	}
	if f.DataDir != nil {
		c.Server.DataDir = *f.DataDir
	}
	if f.GRPCAddr != nil {
		if err := ValidateAddr(*f.GRPCAddr); err != nil {
			return nil, errf("--grpc-addr", "%v", err)
		}
		c.Server.GRPCAddr = *f.GRPCAddr
	}
	if f.HTTPAddr != nil {
		if err := ValidateAddr(*f.HTTPAddr); err != nil {
			return nil, errf("--http-addr", "%v", err)
		}
		c.Server.HTTPAddr = *f.HTTPAddr
	}
	if f.Services != nil {
		c.Server.Services = splitList(*f.Services)
	}
	if f.ExtensionsConfig != nil {
		// An explicitly named file must exist (the default path may be absent:
		// no MCP servers yet).
		if _, err := os.Stat(*f.ExtensionsConfig); err != nil {
			return nil, errf("--extensions-config", "%v", unwrapPath(err))
		}
		if err := SetPath(&c, "catalog.extensions_config", *f.ExtensionsConfig); err != nil {
			return nil, errf("--extensions-config", "%v", err)
		}
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Decode parses YAML into c, rejecting unknown keys with their full path and line.
func Decode(data []byte, c *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return errf("file", "%v", err)
	}
	if len(root.Content) == 0 {
		return nil
	}
	if err := checkKnown(root.Content[0], typeOfConfig, ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		// A value of the wrong type: name the key at the reported line.
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			var line int
			if _, serr := fmt.Sscanf(te.Errors[0], "line %d:", &line); serr == nil {
				if key := keyAtLine(root.Content[0], line, ""); key != "" {
					return &Error{Key: key, Reason: te.Errors[0]}
				}
			}
		}
		return errf("file", "%v", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return nil
}

// keyAtLine returns the dotted path of the first mapping key on line (or
// whose scalar value is on line; block list items as [i]), or "".
func keyAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if k.Line == line || (v.Kind == yaml.ScalarNode && v.Line == line) {
				return p
			}
			if found := keyAtLine(v, line, p); found != "" {
				return found
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Kind != yaml.MappingNode && c.Line == line {
				return p
			}
			if found := keyAtLine(c, line, p); found != "" {
				return found
			}
		}
	}
	return ""
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// CheckDataDir makes sure the data directory exists and is writable.
func CheckDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return errf("--data-dir", "cannot create %s: %v", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return errf("--data-dir", "%s is not writable: %v", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
