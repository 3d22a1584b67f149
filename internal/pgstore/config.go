package pgstore

// Config is the `storage` section of toolplane.yaml, one per process. With
// SectionKey, SetDefaults and Validate it is a config.Section
// (internal/config/section.go), registered by internal/app.
type Config struct {
	// DSN is the PostgreSQL connection string (a libpq URL such as
	// postgres://user:pass@host:5432/toolplane?sslmode=require, or key=value
	// pairs) of the database holding every service's schema (catalog, authz,
	// skills, runtime). Empty (the default): each service keeps its sqlite
	// file in server.data_dir. Environment TOOLPLANE_STORAGE_DSN. It is
	// checked, connected and migrated before the process listens; it never
	// appears in logs or errors. pool_max_conns=N in the DSN sets the
	// process's connection pool size (default 20, shared by its services).
	DSN string `yaml:"dsn"`
}

// SectionKey returns "storage".
func (c *Config) SectionKey() string { return "storage" }

// SetDefaults leaves the DSN empty (sqlite).
func (c *Config) SetDefaults() {}

// Validate checks nothing the connection attempt at start does not check
// better (it runs before anything listens, see internal/app.OpenStorage);
// parsing here could read ~/.pgpass, which a section's Validate must not.
func (c *Config) Validate() error { return nil }
