package authz

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// Config is the `authz` section of toolplane.yaml. Every key is documented,
// with its default, in toolplane.example.yaml.
type Config struct {
	// PolicyFile is an optional policy file (Casbin CSV lines, see
	// authzcasbin.ParsePolicyText). Its lines are file-owned: each load
	// replaces exactly them, and the API cannot edit them. "" = none. Default "".
	PolicyFile string `yaml:"policy_file"`
	// ModelFile replaces the embedded Casbin model (authzcasbin/model.conf)
	// with a custom one of the same request and policy shape; decisions then
	// use plain Casbin Enforce (no index). "" = embedded model. Default "".
	ModelFile string `yaml:"model_file"`
	// ReloadInterval is how often the policy file (content hash) and the
	// store's policy version are checked; a change is applied to the next
	// decision without a restart. Default 1s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// AuditAllows records every Authorize allow in the decision log too (and,
	// like a deny, commits it before answering). Denies are always recorded.
	// Default false.
	AuditAllows bool `yaml:"audit_allows"`
	// FilterFailOpen makes FilterResources keep a candidate whose evaluation
	// failed (store or evaluator error), marked fail_open. Authorize always
	// fails closed. Default false.
	FilterFailOpen bool `yaml:"filter_fail_open"`
	// DecisionRetention deletes allow records and FilterResources summaries
	// older than this; a negative value keeps them forever. Default 720h (30
	// days).
	DecisionRetention time.Duration `yaml:"decision_retention"`
	// DenyRetention deletes Authorize denies older than this; until then no
	// cap evicts them. A negative value keeps them forever. Default 720h.
	DenyRetention time.Duration `yaml:"deny_retention"`
	// DecisionMaxRows caps each tenant's decision records: over it, that
	// tenant's oldest allows and summaries are deleted first, never its
	// denies younger than deny_retention and never another tenant's
	// records. A negative value means no cap. Default 1000000.
	DecisionMaxRows int64 `yaml:"decision_max_rows"`
	// DecisionRate bounds the decision records one principal (tenant and
	// subject) writes per second (token bucket, burst DecisionBurst). Over
	// it, its records are counted, not stored, and one authz.audit_flood
	// record per DecisionFloodWindow says so; an audited allow that is not
	// stored is denied. A negative value = no limit. Default 50.
	DecisionRate float64 `yaml:"decision_rate"`
	// DecisionBurst is the token bucket's size. Default 500.
	DecisionBurst int `yaml:"decision_burst"`
	// DecisionFloodWindow is how often a flooding principal gets one
	// authz.audit_flood record. Default 1m.
	DecisionFloodWindow time.Duration `yaml:"decision_flood_window"`
	// PruneInterval is how often retention runs. Default 10m.
	PruneInterval time.Duration `yaml:"prune_interval"`
	// MaxAuditInputBytes bounds the copy of the call input kept in a decision
	// record (JSON bytes, strings cut at 512 bytes). Default 4096.
	MaxAuditInputBytes int `yaml:"max_audit_input_bytes"`
	// Authorization is a DeerFlow `authorization` section ({roles: {<role>:
	// {tools|models|skills|mcp_servers: {allow, deny}}}}), translated at every
	// start with DeerFlow's semantics (authzcasbin.TranslateDeerFlow); its lines
	// replace the previous DeerFlow import and the default lines of the roles
	// it defines. Absent = none. Default absent.
	Authorization map[string]any `yaml:"authorization"`
	// AnnotationDefaults are the values of the MCP annotation hints
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint) for a
	// tool that does not set them, as conditions read them
	// (annotation.<hint>). Unset hints keep the MCP specification's defaults:
	// readOnlyHint false, destructiveHint true, idempotentHint false,
	// openWorldHint true — an unannotated tool is treated as state-changing.
	AnnotationDefaults map[string]bool `yaml:"annotation_defaults"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.ReloadInterval == 0 {
		c.ReloadInterval = time.Second
	}
	if c.DecisionRetention == 0 {
		c.DecisionRetention = 720 * time.Hour
	}
	if c.DenyRetention == 0 {
		c.DenyRetention = 720 * time.Hour
	}
	if c.DecisionRate == 0 {
		c.DecisionRate = 50
	}
	if c.DecisionBurst == 0 {
		c.DecisionBurst = 500
	}
	if c.DecisionFloodWindow == 0 {
		c.DecisionFloodWindow = time.Minute
	}
	if c.DecisionMaxRows == 0 {
		c.DecisionMaxRows = 1_000_000
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = 10 * time.Minute
	}
	if c.MaxAuditInputBytes == 0 {
		c.MaxAuditInputBytes = 4096
	}
	defaults := maps.Clone(authzcasbin.DefaultAnnotations)
	maps.Copy(defaults, c.AnnotationDefaults)
	c.AnnotationDefaults = defaults
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	switch {
	case c.ReloadInterval < 50*time.Millisecond:
		return fmt.Errorf("authz.reload_interval: must be >= 50ms, got %s", c.ReloadInterval)
	case c.PruneInterval < time.Second:
		return fmt.Errorf("authz.prune_interval: must be >= 1s, got %s", c.PruneInterval)
	case c.DecisionBurst < 1:
		return fmt.Errorf("authz.decision_burst: must be >= 1, got %d", c.DecisionBurst)
	case c.DecisionFloodWindow < time.Second:
		return fmt.Errorf("authz.decision_flood_window: must be >= 1s, got %s", c.DecisionFloodWindow)
	case c.MaxAuditInputBytes < 64 || c.MaxAuditInputBytes > 1<<20:
		return fmt.Errorf("authz.max_audit_input_bytes: must be in 64..1048576, got %d", c.MaxAuditInputBytes)
	}
	for k := range c.AnnotationDefaults {
		if !slices.Contains(authzcasbin.Hints, k) {
			return fmt.Errorf("authz.annotation_defaults.%s: not an MCP annotation hint (want one of %s)", k, strings.Join(authzcasbin.Hints, ", "))
		}
	}
	if c.ModelFile != "" {
		data, err := os.ReadFile(c.ModelFile)
		if err != nil {
			return fmt.Errorf("authz.model_file: %v", err)
		}
		if _, err := authzcasbin.NewEngine(string(data)); err != nil {
			return fmt.Errorf("authz.model_file: %v", err)
		}
	}
	if c.PolicyFile != "" {
		data, err := os.ReadFile(c.PolicyFile)
		if err != nil {
			return fmt.Errorf("authz.policy_file: %v", err)
		}
		if _, _, err := authzcasbin.ParsePolicyText(string(data), authzcasbin.SourceFile); err != nil {
			return fmt.Errorf("authz.policy_file: %s: %v", c.PolicyFile, err)
		}
	}
	if c.Authorization != nil {
		if _, _, err := authzcasbin.TranslateDeerFlow(c.Authorization, "authz.authorization"); err != nil {
			return err
		}
	}
	return nil
}
