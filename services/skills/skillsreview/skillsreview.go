// Package skillsreview builds the read-only structured review of a skill
// package (ReviewSkillPackage; docs/deerflow.md §4.11, docs/architecture.md §11.3).
//
// A review never installs or activates anything. It returns:
//   - Facts: subject (display ref, source, category, declared name, package
//     digest), frontmatter and its problems, the file inventory, completeness
//     and a summary of findings;
//   - Findings: scan findings with severities mapped CRITICAL → blocker,
//     HIGH → error, MEDIUM → warning, LOW → info; frontmatter problems and
//     archive refusals are blockers (install would refuse them);
//   - Text: the model-visible JSON, at most Budget characters (default
//     80,000), with framework tags neutralised, every artifact marked
//     untrusted_review_data;
//   - Full: the complete report (JSON with all text content and a Markdown
//     rendering), returned separately as an artifact for people and tools.
package skillsreview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
)

// DefaultBudget is the model-visible text budget in characters (docs/deerflow.md §4.11).
const DefaultBudget = 80_000

// SchemaVersion of the review facts.
const SchemaVersion = 1

// Levels of a review finding.
const (
	LevelBlocker = "blocker"
	LevelError   = "error"
	LevelWarning = "warning"
	LevelInfo    = "info"
)

// LevelOf maps a scan severity to a review level.
func LevelOf(s skillsscan.Severity) string {
	switch s {
	case skillsscan.Critical:
		return LevelBlocker
	case skillsscan.High:
		return LevelError
	case skillsscan.Medium:
		return LevelWarning
	}
	return LevelInfo
}

// Input is what to review. Exactly one of Package or RefusedErr is set: a
// package the archive reader refused is still reviewed (facts plus one
// blocker naming the refusal).
type Input struct {
	// DisplayRef names the subject, e.g. "skill://custom/pdf-tools" or "archive".
	DisplayRef string
	// Source is "installed", "archive" or "inline".
	Source string
	// Category of an installed skill ("" otherwise).
	Category string
	// Package is the package content.
	Package *skillsarchive.Package
	// RefusedErr is the archive reader's refusal, when it refused.
	RefusedErr error
	// IncludeContent adds text file contents to the model-visible text.
	IncludeContent bool
	// Budget bounds Text in characters; <= 0 = DefaultBudget.
	Budget int
	// Rules is the scanner rule set; nil = skillsscan.Default().
	Rules *skillsscan.Ruleset
	// Context bounds the scan (see skillsscan.Ruleset.ScanContext); nil = no bound.
	Context context.Context
}

// Subject identifies what was reviewed.
type Subject struct {
	DisplayRef    string `json:"display_ref"`
	Source        string `json:"source"`
	Category      string `json:"category,omitempty"`
	DeclaredName  string `json:"declared_name,omitempty"`
	PackageDigest string `json:"package_digest,omitempty"`
}

// InventoryItem is one file of the package.
type InventoryItem struct {
	Path       string `json:"path"`
	Size       int    `json:"size"`
	Kind       string `json:"kind"`
	Executable bool   `json:"executable,omitempty"`
	Text       bool   `json:"text"`
}

// Completeness says how much of the package the review covered.
type Completeness struct {
	PackageEnumerated   bool     `json:"package_enumerated"`
	TextContentComplete bool     `json:"text_content_complete"`
	Truncated           bool     `json:"truncated"`
	NotAssessed         []string `json:"not_assessed"`
}

// Summary counts findings per level.
type Summary struct {
	Blockers int `json:"blockers"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

// Facts are the deterministic facts of a review.
type Facts struct {
	SchemaVersion       int                         `json:"schema_version"`
	Subject             Subject                     `json:"subject"`
	Frontmatter         *skillsmd.Frontmatter       `json:"frontmatter,omitempty"`
	FrontmatterProblems []skillsmd.Problem          `json:"frontmatter_problems"`
	Inventory           []InventoryItem             `json:"inventory"`
	TotalBytes          int64                       `json:"total_bytes"`
	Completeness        Completeness                `json:"completeness"`
	Summary             Summary                     `json:"summary"`
	ReaderErrors        []string                    `json:"reader_errors"`
	RulesDigest         string                      `json:"rules_digest"`
	SeverityCounts      map[skillsscan.Severity]int `json:"severity_counts"`
}

// Finding is a review finding.
type Finding struct {
	Level string `json:"level"`
	skillsscan.Finding
}

// Artifact is one text file shown to the model.
type Artifact struct {
	Path                string `json:"path"`
	Content             string `json:"content"`
	Truncated           bool   `json:"truncated"`
	UntrustedReviewData bool   `json:"untrusted_review_data"`
}

// Report is a complete review.
type Report struct {
	Facts    Facts
	Findings []Finding
	// Text is the model-visible JSON (≤ budget characters, tags neutralised).
	Text string
	// Truncated is true when Text left out content or findings.
	Truncated bool
	// Full is the full report (indented JSON including all text content and
	// a Markdown rendering under "markdown").
	Full []byte
	// Valid is true when the package has a valid SKILL.md and no blockers.
	Valid bool
}

// Review builds the report. It never fails: problems become findings.
func Review(in Input) *Report {
	rules := in.Rules
	if rules == nil {
		rules = skillsscan.Default()
	}
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	f := Facts{SchemaVersion: SchemaVersion, RulesDigest: rules.Digest, FrontmatterProblems: []skillsmd.Problem{},
		Inventory: []InventoryItem{}, ReaderErrors: []string{}, SeverityCounts: map[skillsscan.Severity]int{},
		Subject: Subject{DisplayRef: in.DisplayRef, Source: in.Source, Category: in.Category}}
	var findings []Finding
	if in.Package == nil {
		reason := string(skillsarchive.ReasonOf(in.RefusedErr))
		if reason == "" {
			reason = "unreadable"
		}
		msg := "the package could not be read"
		if in.RefusedErr != nil {
			msg = in.RefusedErr.Error()
		}
		f.ReaderErrors = append(f.ReaderErrors, msg)
		f.Completeness = Completeness{NotAssessed: []string{"content", "frontmatter", "scan"}}
		findings = append(findings, Finding{Level: LevelBlocker, Finding: skillsscan.Finding{
			RuleID: "archive-" + strings.ReplaceAll(reason, "_", "-"), Severity: skillsscan.Critical,
			Message: "The archive is refused: " + msg, Remediation: "Rebuild the package without the refused entry."}})
	} else {
		pkg := in.Package
		f.Subject.PackageDigest = pkg.Digest()
		f.TotalBytes = pkg.TotalBytes()
		f.Completeness = Completeness{PackageEnumerated: true, TextContentComplete: true, NotAssessed: []string{"semantic"}}
		for _, file := range pkg.Files {
			f.Inventory = append(f.Inventory, InventoryItem{Path: file.Path, Size: len(file.Data), Kind: kindOf(file.Path),
				Executable: file.Executable, Text: isText(file.Data)})
		}
		if md := pkg.File("SKILL.md"); md != nil {
			doc, err := skillsmd.ParseStrict(md.Data, pkg.RootName)
			if doc != nil {
				fm := doc.Frontmatter
				f.Frontmatter = &fm
				f.Subject.DeclaredName = fm.Name
			}
			var pe *skillsmd.Error
			if errors.As(err, &pe) {
				f.FrontmatterProblems = pe.Problems
				for _, p := range pe.Problems {
					findings = append(findings, Finding{Level: LevelBlocker, Finding: skillsscan.Finding{
						RuleID: "frontmatter-invalid", Severity: skillsscan.Critical, File: "SKILL.md", Line: p.Line, Column: p.Column,
						Message: p.String(), Remediation: "Fix the SKILL.md frontmatter; install and edit refuse it."}})
				}
			}
		}
		ctx := in.Context
		if ctx == nil {
			ctx = context.Background()
		}
		rep := rules.ScanContext(ctx, pkg)
		for _, sf := range rep.Findings {
			findings = append(findings, Finding{Level: LevelOf(sf.Severity), Finding: sf})
		}
	}
	for _, fd := range findings {
		f.SeverityCounts[fd.Severity]++
		switch fd.Level {
		case LevelBlocker:
			f.Summary.Blockers++
		case LevelError:
			f.Summary.Errors++
		case LevelWarning:
			f.Summary.Warnings++
		default:
			f.Summary.Infos++
		}
	}
	if findings == nil {
		findings = []Finding{}
	}
	r := &Report{Facts: f, Findings: findings, Valid: in.Package != nil && f.Summary.Blockers == 0}
	var artifacts []Artifact
	if in.IncludeContent && in.Package != nil {
		artifacts = textArtifacts(in.Package)
	}
	r.Text, r.Truncated = modelText(&r.Facts, findings, artifacts, budget)
	r.Facts.Completeness.Truncated = r.Truncated
	full := map[string]any{"untrusted_review_data": true, "facts": r.Facts, "findings": findings,
		"artifacts": artifacts, "markdown": Markdown(r)}
	r.Full, _ = json.MarshalIndent(full, "", "  ")
	return r
}

// kindOf classifies a path by its folder (Agent Skills layout).
func kindOf(p string) string {
	switch {
	case p == "SKILL.md":
		return "skill_md"
	case strings.HasPrefix(p, "scripts/"):
		return "script"
	case strings.HasPrefix(p, "references/"):
		return "reference"
	case strings.HasPrefix(p, "templates/"):
		return "template"
	case strings.HasPrefix(p, "assets/"):
		return "asset"
	case strings.HasPrefix(p, "evals/"):
		return "eval"
	}
	return "other"
}

func isText(b []byte) bool {
	return utf8.Valid(b) && !bytes.ContainsRune(b, 0)
}

// textArtifacts returns SKILL.md first, then every other text file in path order.
func textArtifacts(pkg *skillsarchive.Package) []Artifact {
	var out []Artifact
	files := append([]skillsarchive.File(nil), pkg.Files...)
	sort.SliceStable(files, func(i, j int) bool {
		return files[i].Path == "SKILL.md" && files[j].Path != "SKILL.md"
	})
	for _, f := range files {
		if !isText(f.Data) {
			continue
		}
		out = append(out, Artifact{Path: f.Path, Content: string(f.Data), UntrustedReviewData: true})
	}
	return out
}

var (
	blockedTag = regexp.MustCompile(`(?i)<(\s*/?\s*)(system|system-reminder|skill_system|available_skills|disabled_skills|skill_index|skill|slash_skill_activation|available-deferred-tools|function_calls|function_results|tool_result|tool_use|invoke|parameter|im_start|im_end|user|assistant|human|developer|instructions)(\b[^<>]*)?>`)
	// Chat-template special tokens, in any case and with inner spaces: a
	// tokenizer is case-sensitive, but a reviewer model reading "<|IM_START|>"
	// still sees a turn marker, so the match fails closed.
	imTag      = regexp.MustCompile(`(?i)<\|\s*(im_start|im_end|im_sep|endoftext|system|user|assistant|start_header_id|end_header_id|eot_id|begin_of_text)\s*\|>`)
	userMarker = regexp.MustCompile(`(?i)-{3}\s*(BEGIN|END)\s+USER\s+INPUT\s*-{3}`)
)

// Neutralize makes framework and injection tags inert: "<system>" becomes
// "&lt;system&gt;", "<|im_start|>" becomes "&lt;|im_start|&gt;", and the
// "--- BEGIN/END USER INPUT ---" markers become "[quoted BEGIN/END USER INPUT marker]".
func Neutralize(s string) string {
	s = blockedTag.ReplaceAllStringFunc(s, func(m string) string {
		return "&lt;" + m[1:len(m)-1] + "&gt;"
	})
	s = imTag.ReplaceAllStringFunc(s, func(m string) string { return "&lt;" + m[1:len(m)-1] + "&gt;" })
	return userMarker.ReplaceAllStringFunc(s, func(m string) string {
		return "[quoted " + strings.ToUpper(userMarker.FindStringSubmatch(m)[1]) + " USER INPUT marker]"
	})
}

func marshal(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// neutralizeFacts returns a copy of f with every string neutralised (via JSON).
func neutralizeFacts(f Facts) Facts {
	b := marshal(f)
	var out Facts
	_ = json.Unmarshal([]byte(Neutralize(b)), &out)
	return out
}

// modelText assembles the model-visible JSON within budget characters.
func modelText(facts *Facts, findings []Finding, artifacts []Artifact, budget int) (string, bool) {
	type payload struct {
		UntrustedReviewData bool       `json:"untrusted_review_data"`
		Facts               Facts      `json:"facts"`
		Findings            []Finding  `json:"findings"`
		FindingsOmitted     int        `json:"findings_omitted,omitempty"`
		Artifacts           []Artifact `json:"artifacts"`
		ArtifactsOmitted    int        `json:"artifacts_omitted,omitempty"`
	}
	nf := make([]Finding, len(findings))
	for i, fd := range findings {
		fd.Message, fd.Evidence, fd.File = Neutralize(fd.Message), Neutralize(fd.Evidence), Neutralize(fd.File)
		nf[i] = fd
	}
	p := payload{UntrustedReviewData: true, Facts: neutralizeFacts(*facts), Findings: nf, Artifacts: []Artifact{}}
	truncated := false
	// Findings first, most severe first (blockers from the archive and the
	// frontmatter, then the scanner's order): drop the least severe until the
	// header fits its share — all of the budget without content, two fifths
	// with content so the files stay visible.
	headerBudget := budget
	if len(artifacts) > 0 {
		headerBudget = budget * 2 / 5
	}
	for runes(marshal(p)) > headerBudget && len(p.Findings) > 0 {
		p.Findings = p.Findings[:len(p.Findings)-1]
		p.FindingsOmitted++
		truncated = true
	}
	if runes(marshal(p)) > headerBudget {
		// Pathological (huge inventory): keep facts minimal.
		p.Facts.Inventory = nil
		p.Facts.FrontmatterProblems = nil
		truncated = true
	}
	for i, a := range artifacts {
		a.Path = Neutralize(a.Path)
		a.Content = Neutralize(a.Content)
		p.Artifacts = append(p.Artifacts, a)
		if runes(marshal(p)) <= budget {
			continue
		}
		// This artifact crosses the budget: it is cut and the rest omitted.
		// JSON escaping makes the encoded text longer than the content, so
		// shrink until the whole payload fits.
		truncated = true
		p.ArtifactsOmitted = len(artifacts) - i - 1
		cur := &p.Artifacts[len(p.Artifacts)-1]
		cur.Truncated = true
		// Binary search for the longest prefix that fits.
		rs := []rune(cur.Content)
		lo, hi := 0, len(rs)
		for lo < hi {
			mid := (lo + hi + 1) / 2
			cur.Content = string(rs[:mid])
			if runes(marshal(p)) <= budget {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		cur.Content = string(rs[:lo])
		over := runes(marshal(p)) - budget
		if over > 0 {
			p.Artifacts = p.Artifacts[:len(p.Artifacts)-1]
			p.ArtifactsOmitted++
		}
		break
	}
	text := marshal(p)
	for runes(text) > budget && (len(p.Artifacts) > 0 || len(p.Findings) > 0) {
		// Only reachable with tiny budgets: drop whole items, never cut JSON.
		if len(p.Artifacts) > 0 {
			p.Artifacts = p.Artifacts[:len(p.Artifacts)-1]
			p.ArtifactsOmitted++
		} else {
			p.Findings = p.Findings[:len(p.Findings)-1]
			p.FindingsOmitted++
		}
		truncated = true
		text = marshal(p)
	}
	return text, truncated
}

// Markdown renders the report for people.
func Markdown(r *Report) string {
	var b strings.Builder
	f := r.Facts
	fmt.Fprintf(&b, "# Skill review: %s\n\n", mdEscape(firstNonEmpty(f.Subject.DeclaredName, f.Subject.DisplayRef)))
	fmt.Fprintf(&b, "- Source: %s (%s)\n", mdEscape(f.Subject.DisplayRef), f.Subject.Source)
	if f.Subject.PackageDigest != "" {
		fmt.Fprintf(&b, "- Package digest: `%s`\n", f.Subject.PackageDigest)
	}
	fmt.Fprintf(&b, "- Files: %d (%d bytes)\n", len(f.Inventory), f.TotalBytes)
	fmt.Fprintf(&b, "- Summary: %d blocker(s), %d error(s), %d warning(s), %d info\n\n", f.Summary.Blockers, f.Summary.Errors, f.Summary.Warnings, f.Summary.Infos)
	if len(r.Findings) == 0 {
		b.WriteString("No findings.\n")
		return b.String()
	}
	b.WriteString("| Level | Rule | Location | Message |\n|---|---|---|---|\n")
	for _, fd := range r.Findings {
		loc := fd.File
		if fd.Line > 0 {
			loc = fmt.Sprintf("%s:%d", fd.File, fd.Line)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", fd.Level, fd.RuleID, mdEscape(loc), mdEscape(fd.Message))
	}
	return b.String()
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

func firstNonEmpty(a ...string) string {
	for _, s := range a {
		if s != "" {
			return s
		}
	}
	return ""
}
