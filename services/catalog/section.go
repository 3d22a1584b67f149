package catalog

// SectionKey is the top-level key of the catalog section of toolplane.yaml. With
// SetDefaults and Validate (config.go) it makes *Config a config.Section
// (internal/config/section.go), which the composition root registers
// (internal/app/config.go). Every key is documented, with its default, on
// its field and in toolplane.example.yaml.
func (c *Config) SectionKey() string { return "catalog" }
