package skills

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsreview"
)

// Config is the `skills` section of toolplane.yaml. Every key is documented,
// with its default, in toolplane.example.yaml.
type Config struct {
	// ContainerPath is the virtual root under which skill paths are shown to
	// agents: "<container_path>/<category>/<name>/SKILL.md"
	// (docs/deerflow.md §4.1). Default "/mnt/skills".
	ContainerPath string `yaml:"container_path"`
	// Limits bound what InstallSkill, UpdateSkill, ScanSkill and
	// ReviewSkillPackage accept (docs/architecture.md §11.1).
	Limits LimitsConfig `yaml:"limits"`
	// Review configures ReviewSkillPackage.
	Review ReviewConfig `yaml:"review"`
	// Describe configures DescribeSkills.
	Describe DescribeConfig `yaml:"describe"`
	// ScanTimeout bounds one deterministic scan; a scan that does not finish
	// in time blocks the operation (fail closed, rule scan-incomplete).
	// Default 60s.
	ScanTimeout time.Duration `yaml:"scan_timeout"`
	// BlobDir is a folder for the skill files (content-addressed blobs),
	// shared by every skills process that uses it (a ReadWriteMany volume).
	// Empty (the default): DataDir/skills/blobs on sqlite, PostgreSQL bytea
	// when storage.dsn is set (docs/decisions/0080-postgresql-stores.md).
	BlobDir string `yaml:"blob_dir"`
	// Evolution configures ManageSkill, the agent's skill_manage tool
	// (docs/deerflow.md §4.14).
	Evolution EvolutionConfig `yaml:"evolution"`
}

// EvolutionConfig is DeerFlow's `skill_evolution`: agents may create and
// change their user's custom skills through ManageSkill.
type EvolutionConfig struct {
	// Enabled lets ManageSkill change custom skills and makes the runtime
	// bind skill_manage. Default false.
	Enabled bool `yaml:"enabled"`
}

// LimitsConfig bounds skill packages.
type LimitsConfig struct {
	// MaxArchiveBytes is the largest accepted archive. Default 52428800 (50 MiB).
	MaxArchiveBytes int64 `yaml:"max_archive_bytes"`
	// MaxFiles is the largest number of archive entries or inline files. Default 4096.
	MaxFiles int `yaml:"max_files"`
	// MaxFileBytes is the largest single unpacked file. Default 67108864 (64 MiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxTotalBytes is the largest unpacked package. Default 536870912 (512 MiB).
	MaxTotalBytes int64 `yaml:"max_total_bytes"`
	// MaxCompressionRatio is the largest unpacked/packed ratio (bomb guard),
	// applied above 1 MiB unpacked. Default 100.
	MaxCompressionRatio int64 `yaml:"max_compression_ratio"`
}

// ReviewConfig configures ReviewSkillPackage.
type ReviewConfig struct {
	// TextBudget is the maximum length, in characters, of the model-visible
	// review text (docs/deerflow.md §4.11). Default 80000.
	TextBudget int `yaml:"text_budget"`
}

// DescribeConfig configures DescribeSkills.
type DescribeConfig struct {
	// DefaultLimit is the number of matches when the request sets none. Default 5.
	DefaultLimit int `yaml:"default_limit"`
	// MaxLimit caps the request's limit. Default 20.
	MaxLimit int `yaml:"max_limit"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	d := skillsarchive.DefaultLimits()
	if c.ContainerPath == "" {
		c.ContainerPath = "/mnt/skills"
	}
	if c.Limits.MaxArchiveBytes == 0 {
		c.Limits.MaxArchiveBytes = d.MaxArchiveBytes
	}
	if c.Limits.MaxFiles == 0 {
		c.Limits.MaxFiles = d.MaxEntries
	}
	if c.Limits.MaxFileBytes == 0 {
		c.Limits.MaxFileBytes = d.MaxFileBytes
	}
	if c.Limits.MaxTotalBytes == 0 {
		c.Limits.MaxTotalBytes = d.MaxTotalBytes
	}
	if c.Limits.MaxCompressionRatio == 0 {
		c.Limits.MaxCompressionRatio = d.MaxRatio
	}
	if c.Review.TextBudget == 0 {
		c.Review.TextBudget = skillsreview.DefaultBudget
	}
	if c.Describe.DefaultLimit == 0 {
		c.Describe.DefaultLimit = 5
	}
	if c.Describe.MaxLimit == 0 {
		c.Describe.MaxLimit = 20
	}
	if c.ScanTimeout == 0 {
		c.ScanTimeout = 60 * time.Second
	}
}

// Validate checks the section; errors name the key path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("skills.%s: "+format, append([]any{key}, args...)...))
	}
	if !path.IsAbs(c.ContainerPath) || path.Clean(c.ContainerPath) != c.ContainerPath || strings.ContainsAny(c.ContainerPath, "\\:") {
		bad("container_path", "must be a clean absolute path, got %q", c.ContainerPath)
	}
	if c.Limits.MaxArchiveBytes < 1 {
		bad("limits.max_archive_bytes", "must be >= 1")
	}
	if c.Limits.MaxFiles < 1 {
		bad("limits.max_files", "must be >= 1")
	}
	if c.Limits.MaxFileBytes < 1 {
		bad("limits.max_file_bytes", "must be >= 1")
	}
	if c.Limits.MaxTotalBytes < c.Limits.MaxFileBytes {
		bad("limits.max_total_bytes", "must be >= limits.max_file_bytes (%d)", c.Limits.MaxFileBytes)
	}
	if c.Limits.MaxCompressionRatio < 1 {
		bad("limits.max_compression_ratio", "must be >= 1")
	}
	if c.Review.TextBudget < 1000 {
		bad("review.text_budget", "must be >= 1000")
	}
	if c.Describe.DefaultLimit < 1 {
		bad("describe.default_limit", "must be >= 1")
	}
	if c.Describe.MaxLimit < c.Describe.DefaultLimit {
		bad("describe.max_limit", "must be >= describe.default_limit (%d)", c.Describe.DefaultLimit)
	}
	if c.ScanTimeout < time.Second {
		bad("scan_timeout", "must be >= 1s")
	}
	return errors.Join(errs...)
}

func (c *Config) limits() skillsarchive.Limits {
	return skillsarchive.Limits{MaxArchiveBytes: c.Limits.MaxArchiveBytes, MaxEntries: c.Limits.MaxFiles,
		MaxFileBytes: c.Limits.MaxFileBytes, MaxTotalBytes: c.Limits.MaxTotalBytes, MaxRatio: c.Limits.MaxCompressionRatio}
}
