package app

import (
	"slices"

	"github.com/toolplane/toolplane/internal/config"
	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/authz"
	"github.com/toolplane/toolplane/services/catalog"
	"github.com/toolplane/toolplane/services/runtime"
	"github.com/toolplane/toolplane/services/skills"
)

// AllServices lists the services of the binary in start order
// (docs/architecture.md §1): the default and the allowed values of
// server.services.
var AllServices = []string{"catalog", "authz", "skills", "runtime"}

// Config is the binary's whole toolplane.yaml, a config.Document: the
// loader's own sections (config.Base: server, auth) and the four services'
// sections, each defined, defaulted, validated and documented by its
// service (services/<svc>/section.go; docs/decisions/0020-config-sections.md).
// Load it with LoadConfig (or config.Load), decode it with config.Decode;
// it encodes to YAML as the file it was read from.
type Config struct {
	config.Base
	// Storage is the `storage` section: the PostgreSQL DSN of this process
	// (empty = sqlite in the data directory; internal/pgstore).
	Storage pgstore.Config
	// Catalog is the `catalog` section.
	Catalog catalog.Config
	// Authz is the `authz` section.
	Authz authz.Config
	// Skills is the `skills` section.
	Skills skills.Config
	// Runtime is the `runtime` section.
	Runtime runtime.Config
}

// Sections registers the service sections with the loader, in file and
// validation order. A new section is a field above and one entry here.
func (c *Config) Sections() []config.Section {
	return []config.Section{&c.Storage, &c.Catalog, &c.Authz, &c.Skills, &c.Runtime}
}

// Services returns AllServices.
func (c *Config) Services() []string { return slices.Clone(AllServices) }

// SetDefaults fills every unset key with its default.
func (c *Config) SetDefaults() { config.SetDefaults(c) }

// Validate checks the whole configuration (see config.Validate).
func (c *Config) Validate() error { return config.Validate(c) }

// MarshalYAML encodes the configuration as toolplane.yaml: server, auth,
// then the service sections.
func (c Config) MarshalYAML() (any, error) { return config.Encode(&c) }

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	var c Config
	c.SetDefaults()
	return c
}

// LoadConfig loads the binary's configuration: file, environment and flags
// over the defaults, validated (config.Load).
func LoadConfig(f config.Flags, environ []string) (*Config, error) {
	var c Config
	if err := config.Load(&c, f, environ); err != nil {
		return nil, err
	}
	return &c, nil
}

// ExtensionsConfigFlag is `serve --extensions-config PATH`: it sets
// catalog.extensions_config, and the file it names must exist (the default
// path may be absent: no MCP servers yet).
func ExtensionsConfigFlag(path string) config.KeyFlag {
	return config.KeyFlag{Flag: "--extensions-config", Key: "catalog.extensions_config", Value: path, Check: config.FileExists}
}
