// Package skillsscan is SkillScan, the deterministic scanner of the skills
// service (docs/deerflow.md §4.12, docs/architecture.md §11.2).
//
// The rules are data: rules.yaml (embedded) documents the rule format and
// holds every rule with its stable id, severity, file classes, RE2 pattern,
// message, remediation and examples. [Default] loads and validates it once.
// A scan is a pure function of the package bytes and the rule set: the same
// input always yields the same findings in the same order.
//
// Policy: any CRITICAL finding blocks install, edit, rollback and enable
// ([Report.Blocked]); everything else is reported.
package skillsscan

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
)

//go:embed rules.yaml
var defaultRules []byte

// Severity is a finding severity.
type Severity string

// Severities, most severe first.
const (
	Critical Severity = "CRITICAL"
	High     Severity = "HIGH"
	Medium   Severity = "MEDIUM"
	Low      Severity = "LOW"
)

// Rank orders severities: CRITICAL 4 ... LOW 1, unknown 0.
func (s Severity) Rank() int {
	switch s {
	case Critical:
		return 4
	case High:
		return 3
	case Medium:
		return 2
	case Low:
		return 1
	}
	return 0
}

// Target values of a rule.
const (
	TargetLine         = "line"
	TargetPath         = "path"
	TargetAllowedTools = "allowed-tools"
)

// File classes a line rule can select.
const (
	ClassText       = "text"
	ClassSkillMD    = "skill_md"
	ClassMarkdown   = "markdown"
	ClassShell      = "shell"
	ClassPython     = "python"
	ClassJavaScript = "javascript"
)

// Rule is one scanner rule as written in rules.yaml.
type Rule struct {
	ID          string   `yaml:"id" json:"id"`
	Family      string   `yaml:"family" json:"family"`
	Severity    Severity `yaml:"severity" json:"severity"`
	Target      string   `yaml:"target" json:"target"`
	Files       []string `yaml:"files" json:"files"`
	Pattern     string   `yaml:"pattern" json:"pattern"`
	Exclude     string   `yaml:"exclude" json:"exclude,omitempty"`
	Keywords    []string `yaml:"keywords" json:"keywords,omitempty"`
	NonASCII    bool     `yaml:"non_ascii" json:"non_ascii,omitempty"`
	Redact      bool     `yaml:"redact" json:"redact"`
	Message     string   `yaml:"message" json:"message"`
	Remediation string   `yaml:"remediation" json:"remediation"`
	Examples    struct {
		Positive []string `yaml:"positive" json:"positive"`
		Negative []string `yaml:"negative" json:"negative"`
	} `yaml:"examples" json:"-"`

	re, exclude *regexp.Regexp
	keys        []keyword
}

// keyword is a compiled prefilter literal.
type keyword struct {
	lit           string
	before, after bool // word boundary required before / after
}

// Ruleset is a validated, compiled set of rules.
type Ruleset struct {
	Version int     `yaml:"version"`
	Rules   []*Rule `yaml:"rules"`
	// Digest is the SHA-256 (hex, first 16 characters) of the rule file, so a
	// report names the exact rules it was produced with.
	Digest string `yaml:"-"`

	ac *automaton
}

var (
	ruleIDRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	classes  = map[string]bool{ClassText: true, ClassSkillMD: true, ClassMarkdown: true, ClassShell: true, ClassPython: true, ClassJavaScript: true}

	defaultOnce sync.Once
	defaultSet  *Ruleset
	defaultErr  error
)

// Default returns the embedded rule set. It panics if the embedded file is
// invalid (a build-time bug caught by the package tests).
func Default() *Ruleset {
	defaultOnce.Do(func() { defaultSet, defaultErr = Load(defaultRules) })
	if defaultErr != nil {
		panic("skillsscan: embedded rules.yaml: " + defaultErr.Error())
	}
	return defaultSet
}

// DefaultRulesYAML returns the embedded rule file (for documentation and CLI output).
func DefaultRulesYAML() []byte { return bytes.Clone(defaultRules) }

// Load parses and validates a rule file. Errors name the rule id (or index) and the field.
func Load(data []byte) (*Ruleset, error) {
	var rs Ruleset
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if rs.Version != 1 {
		return nil, fmt.Errorf("rules: version: must be 1, got %d", rs.Version)
	}
	seen := map[string]bool{}
	for i, r := range rs.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		if r.ID != "" {
			where = fmt.Sprintf("rules[%d] (%s)", i, r.ID)
		}
		if !ruleIDRE.MatchString(r.ID) {
			return nil, fmt.Errorf("%s.id: must be lowercase-hyphenated", where)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("%s.id: duplicate", where)
		}
		seen[r.ID] = true
		if r.Severity.Rank() == 0 {
			return nil, fmt.Errorf("%s.severity: must be CRITICAL, HIGH, MEDIUM or LOW", where)
		}
		if r.Family == "" {
			return nil, fmt.Errorf("%s.family: required", where)
		}
		switch r.Target {
		case "":
			r.Target = TargetLine
		case TargetLine, TargetPath, TargetAllowedTools:
		default:
			return nil, fmt.Errorf("%s.target: must be line, path or allowed-tools", where)
		}
		if len(r.Files) == 0 {
			r.Files = []string{ClassText}
		}
		for _, c := range r.Files {
			if !classes[c] {
				return nil, fmt.Errorf("%s.files: unknown class %q", where, c)
			}
		}
		var err error
		if r.re, err = regexp.Compile(r.Pattern); err != nil || r.Pattern == "" {
			return nil, fmt.Errorf("%s.pattern: %v", where, err)
		}
		if r.Exclude != "" {
			if r.exclude, err = regexp.Compile(r.Exclude); err != nil {
				return nil, fmt.Errorf("%s.exclude: %v", where, err)
			}
		}
		r.keys = nil
		for _, k := range r.Keywords {
			kw := keyword{lit: k}
			kw.lit, kw.before = strings.CutPrefix(kw.lit, `\b`)
			kw.lit, kw.after = strings.CutSuffix(kw.lit, `\b`)
			if kw.lit == "" || kw.lit != strings.ToLower(kw.lit) || hasNonASCII(kw.lit) {
				return nil, fmt.Errorf("%s.keywords: %q must be non-empty lowercase ASCII", where, k)
			}
			r.keys = append(r.keys, kw)
		}
		if r.Message == "" || r.Remediation == "" {
			return nil, fmt.Errorf("%s: message and remediation are required", where)
		}
		if len(r.Examples.Positive) == 0 || len(r.Examples.Negative) == 0 {
			return nil, fmt.Errorf("%s.examples: at least one positive and one negative example are required", where)
		}
	}
	sum := sha256.Sum256(data)
	rs.Digest = hex.EncodeToString(sum[:])[:16]
	rs.ac = newAutomaton(rs.Rules)
	return &rs, nil
}

// Rule returns the rule with id, or nil.
func (rs *Ruleset) Rule(id string) *Rule {
	for _, r := range rs.Rules {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Finding is one scanner result. Line and Column are 1-based (0 for path and
// package-level findings); Evidence is the matched text, bounded, with
// invisible characters shown as U+XXXX and secrets redacted.
type Finding struct {
	RuleID      string   `json:"rule_id"`
	Severity    Severity `json:"severity"`
	File        string   `json:"file"`
	Line        int      `json:"line"`
	Column      int      `json:"column"`
	Message     string   `json:"message"`
	Remediation string   `json:"remediation"`
	Evidence    string   `json:"evidence"`
}

// Report is the result of one scan.
type Report struct {
	Findings []Finding `json:"findings"`
	// Blocked is true when any finding is CRITICAL.
	Blocked bool `json:"blocked"`
	// Counts per severity.
	Counts map[Severity]int `json:"counts"`
	// RulesDigest identifies the rule set used.
	RulesDigest string `json:"rules_digest"`
	// FilesScanned counts the files scanned.
	FilesScanned int `json:"files_scanned"`

	incompleteAt string
}

// MaxFindingsPerRuleFile bounds the findings one rule reports for one file
// (further matches are summarised in the last finding's message).
const MaxFindingsPerRuleFile = 20

// IncompleteRuleID is the id of the synthetic CRITICAL finding a scan
// reports when its context ends before every file was scanned (fail closed:
// an unfinished scan blocks like a CRITICAL finding).
const IncompleteRuleID = "scan-incomplete"

// Scan runs every rule over the package. It never fails.
func (rs *Ruleset) Scan(pkg *skillsarchive.Package) Report {
	return rs.ScanContext(context.Background(), pkg)
}

// ScanContext is Scan bounded by ctx: when ctx ends first, the report holds
// the findings so far plus a CRITICAL IncompleteRuleID finding naming the
// file that was being scanned. Go's RE2 engine is linear in the input, but
// long single lines (minified code, data) cost roughly 0.2-0.6 µs per byte
// per rule whose keywords occur, so callers bound scans with a timeout.
func (rs *Ruleset) ScanContext(ctx context.Context, pkg *skillsarchive.Package) (rep Report) {
	rep = Report{Counts: map[Severity]int{}, RulesDigest: rs.Digest, Findings: []Finding{}}
	defer func() {
		if ctx.Err() != nil {
			rep.Findings = append(rep.Findings, Finding{RuleID: IncompleteRuleID, Severity: Critical, File: rep.incompleteAt,
				Message:     "The scan did not finish in time, so the package cannot be trusted.",
				Remediation: "Remove large generated or minified files (they cannot be reviewed), or ask an operator to raise skills.scan_timeout.",
				Evidence:    ctx.Err().Error()})
			rep.Counts[Critical]++
			rep.Blocked = true
		}
	}()
	for _, f := range pkg.Files {
		rep.incompleteAt = f.Path
		if ctx.Err() != nil {
			return rep
		}
		for _, r := range rs.Rules {
			if r.Target == TargetPath && r.re.MatchString(f.Path) && (r.exclude == nil || !r.exclude.MatchString(f.Path)) {
				rep.add(r, f.Path, 0, 0, f.Path)
			}
		}
		// Every file is scanned line by line, binary-looking ones included: a
		// script with one stray invalid byte still runs, so skipping it would
		// fail open.
		rep.FilesScanned++
		cls := fileClasses(f)
		var lineRules []*Rule
		for _, r := range rs.Rules {
			if r.Target != TargetLine {
				continue
			}
			for _, c := range r.Files {
				if cls[c] {
					lineRules = append(lineRules, r)
					break
				}
			}
		}
		if len(lineRules) == 0 {
			continue
		}
		text := string(bytes.TrimPrefix(f.Data, []byte("\xef\xbb\xbf")))
		lines := strings.Split(text, "\n")
		cand := rs.candidates(lineRules, text, lines)
		counts := map[string]int{}
		for i, line := range lines {
			if len(cand[i]) == 0 {
				continue
			}
			if i%256 == 0 && ctx.Err() != nil {
				return rep
			}
			line = strings.TrimSuffix(line, "\r")
			for _, r := range cand[i] {
				if ctx.Err() != nil {
					return rep
				}
				loc := r.re.FindStringIndex(line)
				if loc == nil || (r.exclude != nil && r.exclude.MatchString(line)) {
					continue
				}
				counts[r.ID]++
				if counts[r.ID] > MaxFindingsPerRuleFile {
					continue
				}
				col := utf8.RuneCountInString(line[:loc[0]]) + 1
				rep.add(r, f.Path, i+1, col, evidence(r, line[loc[0]:loc[1]]))
			}
		}
		for id, n := range counts {
			if n > MaxFindingsPerRuleFile {
				for k := len(rep.Findings) - 1; k >= 0; k-- {
					if rep.Findings[k].RuleID == id && rep.Findings[k].File == f.Path {
						rep.Findings[k].Message += fmt.Sprintf(" (%d more matches in this file not listed)", n-MaxFindingsPerRuleFile)
						break
					}
				}
			}
		}
	}
	if md := pkg.File("SKILL.md"); md != nil {
		if doc, _ := skillsmd.ParseLenient(md.Data); doc != nil && doc.Frontmatter.AllowedToolsSet {
			line := doc.Positions["allowed-tools"]
			for _, tool := range doc.Frontmatter.AllowedTools {
				for _, r := range rs.Rules {
					if r.Target == TargetAllowedTools && r.re.MatchString(tool) && (r.exclude == nil || !r.exclude.MatchString(tool)) {
						rep.add(r, "SKILL.md", line, 1, evidence(r, tool))
					}
				}
			}
		}
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Severity.Rank() != b.Severity.Rank() {
			return a.Severity.Rank() > b.Severity.Rank()
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.RuleID < b.RuleID
	})
	return rep
}

// candidates returns, per line, the rules whose prefilter passes on that
// line, in rule order: one Aho-Corasick pass over the file finds every
// keyword occurrence; rules without keywords apply to every line (or every
// non-ASCII line for non_ascii rules).
func (rs *Ruleset) candidates(rules []*Rule, text string, lines []string) [][]*Rule {
	index := make(map[*Rule]int, len(rs.Rules))
	for i, r := range rs.Rules {
		index[r] = i
	}
	applies := make([]bool, len(rs.Rules))
	for _, r := range rules {
		applies[index[r]] = true
	}
	hits := make([][]bool, len(lines)) // hits[line][rule index], allocated on first hit
	mark := func(ri, li int) {
		if hits[li] == nil {
			hits[li] = make([]bool, len(rs.Rules))
		}
		hits[li][ri] = true
	}
	rs.ac.scan(asciiLower(text), func(e acEntry, li int) {
		if applies[e.rule] && li < len(lines) {
			mark(e.rule, li)
		}
	})
	ris := make([]int, len(rules))
	unkeyed := false
	for j, r := range rules {
		ris[j] = index[r]
		unkeyed = unkeyed || len(r.keys) == 0
	}
	cand := make([][]*Rule, len(lines))
	for li, line := range lines {
		h := hits[li]
		if h == nil && !unkeyed {
			continue
		}
		nonASCII := -1 // computed on demand
		for j, r := range rules {
			if len(r.keys) > 0 && (h == nil || !h[ris[j]]) {
				continue
			}
			if r.NonASCII {
				if nonASCII < 0 {
					nonASCII = 0
					if hasNonASCII(line) {
						nonASCII = 1
					}
				}
				if nonASCII == 0 {
					continue
				}
			}
			cand[li] = append(cand[li], r)
		}
	}
	return cand
}

// asciiLower lower-cases ASCII letters only, so byte offsets stay those of s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// hasKeyword is the prefilter: true when the rule has no keywords or lower
// contains one of them.
func (r *Rule) hasKeyword(lower string) bool {
	if r.NonASCII && !hasNonASCII(lower) {
		return false
	}
	if len(r.keys) == 0 {
		return true
	}
	for _, k := range r.keys {
		if k.in(lower) {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

// in reports whether k occurs in s with the required word boundaries.
func (k keyword) in(s string) bool { return k.index(s, 0) >= 0 }

// index returns the first offset >= from where k occurs in s with the
// required word boundaries, or -1.
func (k keyword) index(s string, from int) int {
	for off := from; off <= len(s); {
		i := strings.Index(s[off:], k.lit)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(k.lit)
		okBefore := !k.before || i == 0 || !isWordByte(s[i-1]) || !isWordByte(s[i])
		okAfter := !k.after || end == len(s) || !isWordByte(s[end]) || !isWordByte(s[end-1])
		if okBefore && okAfter {
			return i
		}
		off = i + 1
	}
	return -1
}

func (rep *Report) add(r *Rule, file string, line, col int, ev string) {
	rep.Findings = append(rep.Findings, Finding{RuleID: r.ID, Severity: r.Severity, File: file, Line: line, Column: col,
		Message: r.Message, Remediation: r.Remediation, Evidence: ev})
	rep.Counts[r.Severity]++
	if r.Severity == Critical {
		rep.Blocked = true
	}
}

// MaxEvidenceRunes bounds the evidence text of a finding.
const MaxEvidenceRunes = 120

// evidence renders a match safely: invisible/format characters become U+XXXX,
// secrets keep only their first 4 characters.
func evidence(r *Rule, match string) string {
	if r.Redact {
		rs := []rune(match)
		keep := 4
		if len(rs) < keep {
			keep = len(rs)
		}
		return fmt.Sprintf("%s****[REDACTED %d chars]", escapeInvisible(string(rs[:keep])), len(rs))
	}
	e := escapeInvisible(match)
	if utf8.RuneCountInString(e) > MaxEvidenceRunes {
		e = string([]rune(e)[:MaxEvidenceRunes]) + "..."
	}
	return e
}

// escapeInvisible replaces control, format (Cf: bidi, zero-width, tags) and
// other non-printing runes with U+XXXX.
func escapeInvisible(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if r == '\t' || (unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r)) {
			sb.WriteRune(r)
		} else {
			fmt.Fprintf(&sb, "U+%04X", r)
		}
	}
	return sb.String()
}

var (
	extClass = map[string]string{
		".md": ClassMarkdown, ".markdown": ClassMarkdown,
		".sh": ClassShell, ".bash": ClassShell, ".zsh": ClassShell, ".ksh": ClassShell,
		".py": ClassPython, ".pyw": ClassPython,
		".js": ClassJavaScript, ".mjs": ClassJavaScript, ".cjs": ClassJavaScript, ".ts": ClassJavaScript,
		".mts": ClassJavaScript, ".cts": ClassJavaScript, ".jsx": ClassJavaScript, ".tsx": ClassJavaScript,
	}
)

// fileClasses returns the classes of a text file.
//
// A program (any file under scripts/, or an executable file) is scanned as
// code whatever its name or extension, because it is run, not read
// (docs/deerflow.md §4.14): its languages are those of its extension, its
// shebang (after an optional byte-order mark) and its content
// ([contentLanguages]); when none is recognised, or the shebang names an
// interpreter the scanner has no rules for, it is scanned with every
// language's rules (fail closed).
func fileClasses(f skillsarchive.File) map[string]bool {
	cls := map[string]bool{ClassText: true} // every file is treated as text
	if f.Path == "SKILL.md" {
		cls[ClassSkillMD] = true
		cls[ClassMarkdown] = true
	}
	if c, ok := extClass[strings.ToLower(path.Ext(f.Path))]; ok {
		cls[c] = true
	}
	interp := shebang(f.Data)
	if c := interpreterClass(interp); c != "" {
		cls[c] = true
	}
	if !f.Executable && !strings.HasPrefix(f.Path, "scripts/") {
		return cls
	}
	for _, c := range contentLanguages(f.Data) {
		cls[c] = true
	}
	if (interp != "" && interpreterClass(interp) == "") || (!cls[ClassShell] && !cls[ClassPython] && !cls[ClassJavaScript]) {
		cls[ClassShell], cls[ClassPython], cls[ClassJavaScript] = true, true, true
	}
	return cls
}

// interpreterClass maps a shebang interpreter to a file class ("" if the
// scanner has no rules for it).
func interpreterClass(interp string) string {
	switch {
	case interp == "":
		return ""
	case interp == "sh" || interp == "bash" || interp == "zsh" || interp == "ksh" || interp == "dash" || interp == "ash":
		return ClassShell
	case strings.HasPrefix(interp, "python"):
		return ClassPython
	case interp == "node" || interp == "deno" || interp == "bun" || interp == "nodejs":
		return ClassJavaScript
	}
	return ""
}

// Content heuristics of [contentLanguages]: each matches a line that is
// typical of one language. They only add classes, never remove one.
var (
	pythonLineRE = regexp.MustCompile(`(?m)^[ \t]*(import[ \t]+[A-Za-z_][\w.]*([ \t]*,[ \t]*[A-Za-z_][\w.]*)*([ \t]+as[ \t]+\w+)?[ \t]*(#.*)?\r?$|from[ \t]+\.*[\w.]*[ \t]+import[ \t]|def[ \t]+\w+[ \t]*\(.*\)[^:\n]*:|class[ \t]+\w+[ \t]*(\(.*\))?[ \t]*:|if[ \t]+__name__[ \t]*==|print[ \t]*\()`)
	jsLineRE     = regexp.MustCompile(`(?m)\brequire[ \t]*\([ \t]*["'\x60]|^[ \t]*(const|let|var)[ \t]+[\w${}\[\], ]+=|^[ \t]*import[ \t]+[^\n]*\bfrom[ \t]+["']|^[ \t]*export[ \t]+(default|const|function|class|async)\b|\bmodule\.exports\b|\bconsole\.\w+[ \t]*\(|\bfunction[ \t]*\w*[ \t]*\(|=>|\b(atob|btoa)[ \t]*\(|\bprocess\.(env|argv|exit)\b`)
	shellLineRE  = regexp.MustCompile(`(?m)^[ \t]*(set[ \t]+[-+][a-zA-Z]+|echo[ \t]|printf[ \t]|export[ \t]+\w+=|if[ \t]+\[|\[\[?[ \t]|for[ \t]+\w+[ \t]+in[ \t]|while[ \t]+|case[ \t].*[ \t]in[ \t]*$|fi|done|esac|then|cd[ \t]|\w+=\S*[ \t]*$|(sudo[ \t]+)?(rm|cp|mv|mkdir|curl|wget|chmod|chown|exec|source|\.)[ \t])`)
)

// contentLanguages detects the languages of a program by its content.
func contentLanguages(data []byte) []string {
	var out []string
	for _, h := range []struct {
		re  *regexp.Regexp
		cls string
	}{{pythonLineRE, ClassPython}, {jsLineRE, ClassJavaScript}, {shellLineRE, ClassShell}} {
		if h.re.Match(data) {
			out = append(out, h.cls)
		}
	}
	return out
}

// shebang returns the interpreter named by a "#!" first line ("" if none),
// after an optional UTF-8 byte-order mark, looking through
// "/usr/bin/env [-S] name".
func shebang(data []byte) string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !bytes.HasPrefix(data, []byte("#!")) {
		return ""
	}
	first, _, _ := bytes.Cut(data[2:], []byte("\n"))
	fields := strings.Fields(string(first))
	for i, f := range fields {
		base := path.Base(f)
		if i == 0 && base == "env" {
			continue
		}
		if strings.HasPrefix(f, "-") || (i > 0 && path.Base(fields[0]) == "env" && strings.Contains(f, "=")) {
			continue
		}
		return base
	}
	return ""
}

func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}
