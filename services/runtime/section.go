package runtime

import "fmt"

// SectionKey is the top-level key of the runtime section of toolplane.yaml.
// With SetDefaults and Validate (server.go) and ValidateProcess it makes
// *Config a config.Section and config.ProcessValidator
// (internal/config/section.go), which the composition root registers
// (internal/app/config.go). Every key is documented, with its default, on
// its field and in toolplane.example.yaml.
func (c *Config) SectionKey() string { return "runtime" }

// ValidateProcess checks the section against the services of its process:
// a runtime reaches catalog, authz and skills in-process when the process
// serves them, and needs runtime.upstreams.<svc>.address otherwise.
func (c *Config) ValidateProcess(serves func(service string) bool) error {
	if !serves("runtime") {
		return nil
	}
	for _, up := range []string{"catalog", "authz", "skills"} {
		if !serves(up) && c.Upstream(up).Address == "" {
			return fmt.Errorf("runtime.upstreams.%s.address: required when %s is not served by this process", up, up)
		}
	}
	return nil
}
