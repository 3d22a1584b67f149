package runtime

import (
	"fmt"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// LimitsConfig is `runtime.limits`: bounds checked before any expensive
// work (docs/architecture.md §5, "Bounded cost"). Each exceeded bound is
// INVALID_ARGUMENT naming its key (inside a tool call: a refused call
// whose text names it).
type LimitsConfig struct {
	// ToolArguments bounds one tool call's arguments.
	ToolArguments ToolArgumentLimits `yaml:"tool_arguments"`
	// MessageMaxBytes bounds user text: AssembleTools user_message, RunTurn
	// message, ResumeRun answer (default 1 MiB).
	MessageMaxBytes int `yaml:"message_max_bytes"`
	// Workspace bounds the thread file system.
	Workspace WorkspaceLimits `yaml:"workspace"`
}

// ToolArgumentLimits is `runtime.limits.tool_arguments`.
type ToolArgumentLimits struct {
	// MaxBytes bounds raw_arguments or the encoded arguments (default 4 MiB).
	MaxBytes int `yaml:"max_bytes"`
	// MaxDepth bounds object/array nesting (default 64).
	MaxDepth int `yaml:"max_depth"`
	// MaxElements bounds the number of values at every depth (default 100000).
	MaxElements int `yaml:"max_elements"`
	// ValidateSchema checks a call's arguments against the input schema
	// the model saw before the call (default true;
	// docs/decisions/0093-arguments-checked-against-the-bound-schema.md).
	ValidateSchema *bool `yaml:"validate_schema"`
}

// WorkspaceLimits is `runtime.limits.workspace`.
type WorkspaceLimits struct {
	// FileMaxBytes bounds one file written by write_file or str_replace
	// (default 16 MiB).
	FileMaxBytes int64 `yaml:"file_max_bytes"`
	// ThreadQuotaBytes bounds the bytes of one thread's /mnt/user-data
	// after a write (default 256 MiB).
	ThreadQuotaBytes int64 `yaml:"thread_quota_bytes"`
}

func (c *Config) setLimitDefaults() {
	l := &c.Limits
	if l.ToolArguments.MaxBytes == 0 {
		l.ToolArguments.MaxBytes = runtimechain.DefaultArgumentMaxBytes
	}
	if l.ToolArguments.MaxDepth == 0 {
		l.ToolArguments.MaxDepth = runtimechain.DefaultArgumentMaxDepth
	}
	if l.ToolArguments.MaxElements == 0 {
		l.ToolArguments.MaxElements = runtimechain.DefaultArgumentMaxElements
	}
	if l.ToolArguments.ValidateSchema == nil {
		on := true
		l.ToolArguments.ValidateSchema = &on
	}
	if l.MessageMaxBytes == 0 {
		l.MessageMaxBytes = 1 << 20
	}
	if l.Workspace.FileMaxBytes == 0 {
		l.Workspace.FileMaxBytes = 16 << 20
	}
	if l.Workspace.ThreadQuotaBytes == 0 {
		l.Workspace.ThreadQuotaBytes = 256 << 20
	}
}

func (c *Config) validateLimits() error {
	l := c.Limits
	for key, v := range map[string]int64{
		"tool_arguments.max_bytes": int64(l.ToolArguments.MaxBytes), "tool_arguments.max_depth": int64(l.ToolArguments.MaxDepth),
		"tool_arguments.max_elements": int64(l.ToolArguments.MaxElements), "message_max_bytes": int64(l.MessageMaxBytes),
		"workspace.file_max_bytes": l.Workspace.FileMaxBytes, "workspace.thread_quota_bytes": l.Workspace.ThreadQuotaBytes,
	} {
		if v < 1 {
			return fmt.Errorf("runtime.limits.%s: must be positive, got %d", key, v)
		}
	}
	if l.ToolArguments.MaxDepth > 10000 {
		return fmt.Errorf("runtime.limits.tool_arguments.max_depth: at most 10000, got %d", l.ToolArguments.MaxDepth)
	}
	if l.Workspace.FileMaxBytes > l.Workspace.ThreadQuotaBytes {
		return fmt.Errorf("runtime.limits.workspace.file_max_bytes: %d is above thread_quota_bytes (%d)", l.Workspace.FileMaxBytes, l.Workspace.ThreadQuotaBytes)
	}
	return nil
}

// limits returns runtime.limits with the defaults filled in (a Config
// built without SetDefaults, as in tests, is bounded too).
func (c *Config) limits() LimitsConfig {
	d := Config{Limits: c.Limits}
	d.setLimitDefaults()
	return d.Limits
}

func (c *Config) argumentLimits() runtimechain.ArgumentLimits {
	a := c.limits().ToolArguments
	return runtimechain.ArgumentLimits{MaxBytes: a.MaxBytes, MaxDepth: a.MaxDepth, MaxElements: a.MaxElements,
		ValidateSchema: a.ValidateSchema == nil || *a.ValidateSchema}
}

// limitErr is INVALID_ARGUMENT for an exceeded bound: the BadRequest names
// the request field, the ErrorInfo metadata "limit" the config key.
func limitErr(field string, e *runtimechain.LimitError) error {
	return grpcx.InvalidMeta(errorDomain, runtimev1.ErrorReason_ERROR_REASON_INVALID_REQUEST.String(), map[string]string{"limit": e.Key, "max": fmt.Sprint(e.Limit)},
		grpcx.Violation{Field: field, Reason: grpcx.ViolationTooLong, Description: e.Error()})
}

// textLimit checks user text against runtime.limits.message_max_bytes.
func (c *Config) textLimit(field, v string) error {
	if m := c.limits().MessageMaxBytes; len(v) > m {
		return limitErr(field, &runtimechain.LimitError{Key: "runtime.limits.message_max_bytes", Limit: m, What: fmt.Sprintf("%s of %d bytes", field, len(v))})
	}
	return nil
}
