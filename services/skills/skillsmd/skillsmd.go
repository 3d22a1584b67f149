// Package skillsmd parses the YAML frontmatter of a SKILL.md file.
//
// Two readers share one YAML pass (go.yaml.in/yaml/v3, node API, so every
// problem carries the 1-based line and column of the offending node in the
// SKILL.md file itself, not in the frontmatter block):
//
//   - [ParseStrict] is the install/edit validator (docs/deerflow.md §4.3,
//     Agent Skills specification): unknown keys, wrong types, the name and
//     length rules and the description character rules are all errors.
//   - [ParseLenient] reads skills that are already installed: it never hides
//     a skill, it returns whatever could be read plus the list of problems.
//     Malformed security-relevant fields fail closed (a malformed
//     allowed-tools becomes the explicit empty list, a malformed
//     secrets-autonomous becomes false).
package skillsmd

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Field limits from the Agent Skills specification (docs/deerflow.md §4.3).
const (
	// MaxNameLen is the maximum length of name, in characters.
	MaxNameLen = 64
	// MaxDescriptionLen is the maximum length of description, in characters.
	MaxDescriptionLen = 1024
	// MaxCompatibilityLen is the maximum length of compatibility, in characters.
	MaxCompatibilityLen = 500
	// MaxFrontmatterBytes bounds the frontmatter block; larger blocks are refused
	// before YAML parsing (defence against alias/size bombs).
	MaxFrontmatterBytes = 64 << 10
)

// AllowedKeys are the frontmatter keys accepted by the strict validator
// (docs/deerflow.md §4.3).
var AllowedKeys = []string{
	"name", "description", "license", "allowed-tools", "compatibility",
	"metadata", "version", "author", "required-secrets", "secrets-autonomous",
}

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	yamlLine = regexp.MustCompile(`line (\d+):`)
)

// ValidName reports whether s is a valid skill name: 1-64 characters of
// lowercase letters, digits and single hyphens, no leading or trailing hyphen.
func ValidName(s string) bool {
	return len(s) >= 1 && len(s) <= MaxNameLen && nameRE.MatchString(s)
}

// Problem is one frontmatter error. Field is the frontmatter key (or
// "frontmatter" for structural problems); Line and Column are 1-based
// positions in the SKILL.md file (0 when unknown).
type Problem struct {
	Field   string `json:"field"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// String renders the problem as "field (line L, column C): message".
func (p Problem) String() string {
	return fmt.Sprintf("%s (line %d, column %d): %s", p.Field, p.Line, p.Column, p.Message)
}

// Error is the error returned by [ParseStrict]; it lists every problem.
type Error struct {
	Problems []Problem
}

// Error joins the problems with "; ".
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid SKILL.md frontmatter: " + strings.Join(parts, "; ")
}

// Secret is one entry of required-secrets: an environment-variable name and
// whether the skill works without it.
type Secret struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

// Frontmatter is the decoded frontmatter of a SKILL.md.
type Frontmatter struct {
	Name          string            `json:"name"`
	Description   string            `json:"description"`
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Version       string            `json:"version,omitempty"`
	Author        string            `json:"author,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// AllowedTools is the declared tool list. Meaningful only when
	// AllowedToolsSet is true: absent = no restriction, an explicit empty list
	// = no business tools (docs/deerflow.md §4.3, §4.9).
	AllowedTools    []string `json:"allowed_tools,omitempty"`
	AllowedToolsSet bool     `json:"allowed_tools_set"`
	RequiredSecrets []Secret `json:"required_secrets,omitempty"`
	// SecretsAutonomous defaults to true; a malformed value reads as false.
	SecretsAutonomous bool `json:"secrets_autonomous"`
	// Extra holds unknown keys (lenient reader only), stringified.
	Extra map[string]string `json:"extra,omitempty"`
}

// Document is a parsed SKILL.md.
type Document struct {
	Frontmatter Frontmatter
	// Body is the Markdown after the closing "---" line.
	Body string
	// BodyLine is the 1-based line of the first body line.
	BodyLine int
	// Positions maps each present frontmatter key to its line in the file.
	Positions map[string]int
}

// ParseStrict validates content as a SKILL.md for install or edit. folder,
// when non-empty, is the skill's folder name and must equal the name field.
// The error, if any, is an *[Error] listing every problem found.
func ParseStrict(content []byte, folder string) (*Document, error) {
	doc, probs := parse(content, true)
	if doc != nil && folder != "" && doc.Frontmatter.Name != "" && doc.Frontmatter.Name != folder {
		line := doc.Positions["name"]
		probs = append(probs, Problem{Field: "name", Line: line, Column: 7,
			Message: fmt.Sprintf("%q must equal the skill folder name %q", doc.Frontmatter.Name, folder)})
	}
	if len(probs) > 0 {
		return doc, &Error{Problems: probs}
	}
	return doc, nil
}

// ParseLenient reads an installed SKILL.md. It returns a Document whenever a
// frontmatter block could be located (possibly with empty fields) and the
// problems a strict validation would report. It returns a nil Document only
// when there is no usable frontmatter at all.
func ParseLenient(content []byte) (*Document, []Problem) {
	return parse(content, false)
}

// split locates the frontmatter block. It returns the YAML text, the file line
// of the first YAML line, the body and the body's first line.
func split(content []byte) (yamlText string, firstLine int, body string, bodyLine int, prob *Problem) {
	if !utf8.Valid(content) {
		return "", 0, "", 0, &Problem{Field: "frontmatter", Line: 1, Column: 1, Message: "SKILL.md is not valid UTF-8"}
	}
	s := string(bytes.TrimPrefix(content, []byte("\xef\xbb\xbf")))
	lines := strings.SplitAfter(s, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], "\r\n \t") != "---" {
		return "", 0, "", 0, &Problem{Field: "frontmatter", Line: 1, Column: 1,
			Message: `SKILL.md must start with a "---" line opening the YAML frontmatter`}
	}
	size := 0
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], "\r\n \t") == "---" {
			yamlText = strings.Join(lines[1:i], "")
			body = strings.Join(lines[i+1:], "")
			return yamlText, 2, body, i + 2, nil
		}
		size += len(lines[i])
		if size > MaxFrontmatterBytes {
			return "", 0, "", 0, &Problem{Field: "frontmatter", Line: i + 1, Column: 1,
				Message: fmt.Sprintf("frontmatter is larger than %d bytes", MaxFrontmatterBytes)}
		}
	}
	return "", 0, "", 0, &Problem{Field: "frontmatter", Line: 1, Column: 1,
		Message: `frontmatter is not closed: add a "---" line after the last key`}
}

func parse(content []byte, strict bool) (*Document, []Problem) {
	yamlText, first, body, bodyLine, sp := split(content)
	if sp != nil {
		return nil, []Problem{*sp}
	}
	off := first - 1 // add to a YAML line to get the file line
	doc := &Document{Body: body, BodyLine: bodyLine, Positions: map[string]int{}}
	doc.Frontmatter.SecretsAutonomous = true
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(yamlText), &root); err != nil {
		return lenientFallback(doc, yamlText, off, err, strict)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return doc, []Problem{{Field: "frontmatter", Line: first, Column: 1, Message: "frontmatter is empty; name and description are required"}}
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return doc, []Problem{{Field: "frontmatter", Line: m.Line + off, Column: m.Column,
			Message: "frontmatter must be a YAML mapping of key: value lines"}}
	}
	var probs []Problem
	add := func(field string, n *yaml.Node, format string, args ...any) {
		p := Problem{Field: field, Message: fmt.Sprintf(format, args...)}
		if n != nil {
			p.Line, p.Column = n.Line+off, n.Column
		}
		probs = append(probs, p)
	}
	allowed := map[string]bool{}
	for _, k := range AllowedKeys {
		allowed[k] = true
	}
	seen := map[string]bool{}
	fm := &doc.Frontmatter
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, vn := m.Content[i], m.Content[i+1]
		key := kn.Value
		if kn.Kind != yaml.ScalarNode || strings.TrimSpace(key) == "" {
			add("frontmatter", kn, "keys must be non-empty plain strings")
			continue
		}
		if seen[key] {
			add(key, kn, "duplicate key %q", key)
			continue
		}
		seen[key] = true
		doc.Positions[key] = kn.Line + off
		if vn.Kind == yaml.AliasNode {
			add(key, vn, "YAML aliases are not allowed in SKILL.md frontmatter")
			continue
		}
		switch key {
		case "name":
			if s, ok := scalarString(vn, true); !ok {
				add(key, vn, "must be a string")
			} else {
				fm.Name = strings.TrimSpace(s)
				switch {
				case fm.Name == "":
					add(key, vn, "must not be empty")
				case utf8.RuneCountInString(fm.Name) > MaxNameLen:
					add(key, vn, "is %d characters long; the maximum is %d", utf8.RuneCountInString(fm.Name), MaxNameLen)
				case !nameRE.MatchString(fm.Name):
					add(key, vn, "%q must be lowercase letters, digits and single hyphens (no leading, trailing or double hyphen)", fm.Name)
				}
			}
		case "description":
			if s, ok := scalarString(vn, true); !ok {
				add(key, vn, "must be a string (quote it if it looks like a number, boolean or date)")
			} else {
				fm.Description = strings.TrimSpace(s)
				n := utf8.RuneCountInString(fm.Description)
				switch {
				case fm.Description == "":
					add(key, vn, "must not be empty")
				case n > MaxDescriptionLen:
					add(key, vn, "is %d characters long; the maximum is %d", n, MaxDescriptionLen)
				}
				if strings.ContainsAny(fm.Description, "<>") {
					add(key, vn, "must not contain '<' or '>' (they could open or close prompt tags)")
				}
			}
		case "compatibility":
			if s, ok := scalarString(vn, true); !ok {
				add(key, vn, "must be a string")
			} else {
				fm.Compatibility = strings.TrimSpace(s)
				if n := utf8.RuneCountInString(fm.Compatibility); n > MaxCompatibilityLen {
					add(key, vn, "is %d characters long; the maximum is %d", n, MaxCompatibilityLen)
				}
			}
		case "license", "version", "author":
			s, ok := scalarString(vn, false)
			if !ok {
				add(key, vn, "must be a single value, not a list or mapping")
			}
			s = strings.TrimSpace(s)
			switch key {
			case "license":
				fm.License = s
			case "version":
				fm.Version = s
			default:
				fm.Author = s
			}
		case "metadata":
			if vn.Kind != yaml.MappingNode {
				add(key, vn, "must be a mapping of string keys to string values")
				continue
			}
			fm.Metadata = map[string]string{}
			for j := 0; j+1 < len(vn.Content); j += 2 {
				mk, mv := vn.Content[j], vn.Content[j+1]
				if mk.Kind != yaml.ScalarNode {
					add(key, mk, "keys must be strings")
					continue
				}
				if _, dup := fm.Metadata[mk.Value]; dup {
					add(key, mk, "duplicate key %q", mk.Value)
					continue
				}
				s, ok := scalarString(mv, strict)
				if !ok {
					add(key, mv, "value of %q must be a string (quote it)", mk.Value)
					if strict || mv.Kind != yaml.ScalarNode {
						continue
					}
				}
				fm.Metadata[mk.Value] = s
			}
		case "allowed-tools":
			fm.AllowedToolsSet = true
			fm.AllowedTools = []string{}
			if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
				add(key, vn, "must be a list of tool names; write [] for no business tools or remove the key for no restriction")
				continue
			}
			if vn.Kind != yaml.SequenceNode {
				add(key, vn, "must be a YAML list of tool names, e.g. allowed-tools: [read_file, tool_search]")
				continue
			}
			var tools []string
			bad := false
			for _, it := range vn.Content {
				s, ok := scalarString(it, true)
				if !ok || strings.TrimSpace(s) == "" {
					add(key, it, "every entry must be a non-blank string")
					bad = true
					continue
				}
				tools = append(tools, strings.TrimSpace(s))
			}
			if !bad {
				fm.AllowedTools = tools
			} // else: fail closed, explicit empty list
		case "required-secrets":
			if vn.Kind != yaml.SequenceNode {
				add(key, vn, "must be a list of environment-variable names or {name, optional} mappings")
				continue
			}
			dups := map[string]bool{}
			for _, it := range vn.Content {
				var sec Secret
				switch it.Kind {
				case yaml.ScalarNode:
					sec.Name = strings.TrimSpace(it.Value)
				case yaml.MappingNode:
					okEntry := true
					for j := 0; j+1 < len(it.Content); j += 2 {
						ek, ev := it.Content[j], it.Content[j+1]
						switch ek.Value {
						case "name":
							sec.Name = strings.TrimSpace(ev.Value)
						case "optional":
							b, err := strconv.ParseBool(ev.Value)
							if ev.Kind != yaml.ScalarNode || ev.Tag != "!!bool" || err != nil {
								add(key, ev, "optional must be true or false")
								okEntry = false
							}
							sec.Optional = b
						default:
							add(key, ek, "unknown key %q in a secret entry (allowed: name, optional)", ek.Value)
							okEntry = false
						}
					}
					if !okEntry {
						continue
					}
				default:
					add(key, it, "entries must be names or {name, optional} mappings")
					continue
				}
				if !envVarRE.MatchString(sec.Name) {
					add(key, it, "%q is not a valid environment-variable name", sec.Name)
					continue
				}
				if dups[sec.Name] {
					add(key, it, "duplicate secret %q", sec.Name)
					continue
				}
				dups[sec.Name] = true
				fm.RequiredSecrets = append(fm.RequiredSecrets, sec)
			}
		case "secrets-autonomous":
			if vn.Kind != yaml.ScalarNode || vn.Tag != "!!bool" {
				add(key, vn, "must be true or false")
				fm.SecretsAutonomous = false // fail closed
				continue
			}
			b, _ := strconv.ParseBool(vn.Value)
			fm.SecretsAutonomous = b
		default:
			if !allowed[key] {
				if strict {
					add(key, kn, "unknown key %q; allowed keys: %s", key, strings.Join(AllowedKeys, ", "))
				} else {
					if fm.Extra == nil {
						fm.Extra = map[string]string{}
					}
					s, _ := scalarString(vn, false)
					fm.Extra[key] = s
					add(key, kn, "unknown key %q", key)
				}
			}
		}
	}
	if !seen["name"] {
		probs = append(probs, Problem{Field: "name", Line: first, Column: 1, Message: "is required"})
	}
	if !seen["description"] {
		probs = append(probs, Problem{Field: "description", Line: first, Column: 1, Message: "is required"})
	}
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Line < probs[j].Line })
	return doc, probs
}

// scalarString returns the string value of a scalar node. With wantStr it
// accepts only string-tagged scalars (so `name: 123` or `description: yes`
// are errors rather than silently converted).
func scalarString(n *yaml.Node, wantStr bool) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		return "", false
	}
	if wantStr && n.Tag != "!!str" {
		return n.Value, false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	return n.Value, true
}

var keyValueLine = regexp.MustCompile(`^([A-Za-z0-9_-]+):(?:[ \t]+(.*))?$`)

// lenientFallback turns a YAML syntax error into a located problem. The most
// common real failure — an unquoted ": " inside a value such as description
// — gets a message that says how to fix it. In lenient mode, simple
// "key: value" lines are still read so the skill stays visible.
func lenientFallback(doc *Document, yamlText string, off int, err error, strict bool) (*Document, []Problem) {
	lines := strings.Split(yamlText, "\n")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	var probs []Problem
	// Find the first key whose plain value contains ": ".
	for i, l := range lines {
		m := keyValueLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			continue
		}
		v := m[2]
		if v == "" || strings.ContainsAny(v[:1], `"'|>[{&*!`) {
			continue
		}
		idx := strings.Index(v, ": ")
		if idx < 0 {
			continue
		}
		valueStart := len(l) - len(strings.TrimLeft(l[len(m[1])+1:], " \t"))
		col := valueStart + idx + 1
		probs = append(probs, Problem{Field: m[1], Line: i + 1 + off, Column: col,
			Message: fmt.Sprintf(`the value contains an unquoted ": ", which YAML reads as a nested mapping; `+
				`wrap the whole value in double quotes (%s: "%s", escaping any \" inside) or use a folded block (%s: >- followed by the text indented on the next line)`,
				m[1], strings.ReplaceAll(truncate(v, 40), `"`, `\"`), m[1])})
		break
	}
	if len(probs) == 0 {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = yamlLine.ReplaceAllString(msg, "")
		field := "frontmatter"
		if line >= 1 && line <= len(lines) {
			if m := keyValueLine.FindStringSubmatch(lines[line-1]); m != nil {
				field = m[1]
			}
		}
		l := line + off
		if line == 0 {
			l = off + 1
		}
		probs = append(probs, Problem{Field: field, Line: l, Column: 1, Message: "invalid YAML: " + strings.TrimSpace(msg)})
	}
	if !strict {
		// Best effort: read "key: value" lines at column 1.
		for _, l := range lines {
			m := keyValueLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
			if m == nil {
				continue
			}
			v := strings.Trim(strings.TrimSpace(m[2]), `"'`)
			switch m[1] {
			case "name":
				doc.Frontmatter.Name = v
			case "description":
				doc.Frontmatter.Description = v
			case "license":
				doc.Frontmatter.License = v
			case "allowed-tools":
				// fail closed: an unreadable allowed-tools restricts to nothing.
				doc.Frontmatter.AllowedToolsSet = true
				doc.Frontmatter.AllowedTools = []string{}
			}
		}
	}
	return doc, probs
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "..."
}
