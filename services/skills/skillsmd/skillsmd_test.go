package skillsmd

import (
	"errors"
	"strings"
	"testing"
)

const good = `---
name: pdf-tools
description: Extract text and tables from PDF files.
license: MIT
allowed-tools: [read_file, bash]
compatibility: Requires poppler-utils
metadata:
  owner: docs-team
version: "1.2"
author: Jane
required-secrets:
  - PDF_API_KEY
  - {name: OCR_TOKEN, optional: true}
secrets-autonomous: false
---
# PDF tools

Body.
`

func TestParseStrictGood(t *testing.T) {
	doc, err := ParseStrict([]byte(good), "pdf-tools")
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	fm := doc.Frontmatter
	if fm.Name != "pdf-tools" || fm.Description != "Extract text and tables from PDF files." || fm.License != "MIT" {
		t.Fatalf("fields: %+v", fm)
	}
	if !fm.AllowedToolsSet || strings.Join(fm.AllowedTools, ",") != "read_file,bash" {
		t.Fatalf("allowed-tools: %+v", fm.AllowedTools)
	}
	if fm.Metadata["owner"] != "docs-team" || fm.Version != "1.2" || fm.Author != "Jane" {
		t.Fatalf("metadata/version/author: %+v", fm)
	}
	if len(fm.RequiredSecrets) != 2 || fm.RequiredSecrets[1] != (Secret{Name: "OCR_TOKEN", Optional: true}) {
		t.Fatalf("secrets: %+v", fm.RequiredSecrets)
	}
	if fm.SecretsAutonomous {
		t.Fatal("secrets-autonomous should be false")
	}
	if doc.BodyLine != 16 || !strings.HasPrefix(doc.Body, "# PDF tools") {
		t.Fatalf("body line %d body %q", doc.BodyLine, doc.Body)
	}
}

func TestAllowedToolsAbsentVsEmpty(t *testing.T) {
	doc, err := ParseStrict([]byte("---\nname: a\ndescription: d\n---\n"), "")
	if err != nil || doc.Frontmatter.AllowedToolsSet {
		t.Fatalf("absent: err=%v set=%v", err, doc.Frontmatter.AllowedToolsSet)
	}
	if !doc.Frontmatter.SecretsAutonomous {
		t.Fatal("secrets-autonomous default must be true")
	}
	doc, err = ParseStrict([]byte("---\nname: a\ndescription: d\nallowed-tools: []\n---\n"), "")
	if err != nil || !doc.Frontmatter.AllowedToolsSet || len(doc.Frontmatter.AllowedTools) != 0 {
		t.Fatalf("empty: err=%v %+v", err, doc.Frontmatter)
	}
}

func firstProblem(t *testing.T, content, folder string) Problem {
	t.Helper()
	_, err := ParseStrict([]byte(content), folder)
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) == 0 {
		t.Fatalf("expected problems, got %v", err)
	}
	return e.Problems[0]
}

func TestParseStrictErrors(t *testing.T) {
	cases := []struct {
		name, content, folder string
		field                 string
		line, col             int
		msg                   string
	}{
		{"no frontmatter", "# hi\n", "", "frontmatter", 1, 1, "must start"},
		{"unclosed", "---\nname: a\n", "", "frontmatter", 1, 1, "not closed"},
		{"unknown key", "---\nname: a\ndescription: d\ntools: x\n---\n", "", "tools", 4, 1, "unknown key"},
		{"bad name", "---\nname: Bad_Name\ndescription: d\n---\n", "", "name", 2, 7, "lowercase"},
		{"double hyphen", "---\nname: a--b\ndescription: d\n---\n", "", "name", 2, 7, "single hyphens"},
		{"long name", "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", "", "name", 2, 7, "maximum is 64"},
		{"folder mismatch", "---\nname: abc\ndescription: d\n---\n", "xyz", "name", 2, 7, "folder name"},
		{"numeric name", "---\nname: 123\ndescription: d\n---\n", "", "name", 2, 7, "must be a string"},
		{"missing description", "---\nname: a\n---\n", "", "description", 2, 1, "required"},
		{"angle", "---\nname: a\ndescription: use <system> tags\n---\n", "", "description", 3, 14, "'<'"},
		{"long desc", "---\nname: a\ndescription: " + strings.Repeat("x", 1025) + "\n---\n", "", "description", 3, 14, "maximum is 1024"},
		{"bool desc", "---\nname: a\ndescription: true\n---\n", "", "description", 3, 14, "must be a string"},
		{"compat", "---\nname: a\ndescription: d\ncompatibility: " + strings.Repeat("c", 501) + "\n---\n", "", "compatibility", 4, 16, "maximum is 500"},
		{"metadata list", "---\nname: a\ndescription: d\nmetadata: [1]\n---\n", "", "metadata", 4, 11, "mapping"},
		{"metadata int", "---\nname: a\ndescription: d\nmetadata:\n  n: 3\n---\n", "", "metadata", 5, 6, "must be a string"},
		{"tools string", "---\nname: a\ndescription: d\nallowed-tools: read_file\n---\n", "", "allowed-tools", 4, 16, "YAML list"},
		{"tools blank", "---\nname: a\ndescription: d\nallowed-tools: [read_file, \"  \"]\n---\n", "", "allowed-tools", 4, 28, "non-blank"},
		{"tools null", "---\nname: a\ndescription: d\nallowed-tools:\n---\n", "", "allowed-tools", 4, 15, "list"},
		{"secrets non-list", "---\nname: a\ndescription: d\nrequired-secrets: X\n---\n", "", "required-secrets", 4, 19, "list"},
		{"secrets bad name", "---\nname: a\ndescription: d\nrequired-secrets: [1BAD]\n---\n", "", "required-secrets", 4, 20, "environment-variable"},
		{"autonomous", "---\nname: a\ndescription: d\nsecrets-autonomous: maybe\n---\n", "", "secrets-autonomous", 4, 21, "true or false"},
		{"duplicate", "---\nname: a\nname: b\ndescription: d\n---\n", "", "name", 3, 1, "duplicate"},
		{"not mapping", "---\n- a\n---\n", "", "frontmatter", 2, 1, "mapping"},
		{"alias", "---\nname: &x a\ndescription: *x\n---\n", "", "description", 3, 14, "aliases"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := firstProblem(t, c.content, c.folder)
			if p.Field != c.field || p.Line != c.line || p.Column != c.col || !strings.Contains(p.Message, c.msg) {
				t.Fatalf("got %s; want field %s line %d col %d containing %q", p, c.field, c.line, c.col, c.msg)
			}
		})
	}
}

func TestUnquotedColonInDescription(t *testing.T) {
	content := "---\nname: review\ndescription: Review configs. Use when: the user asks\n---\nbody\n"
	p := firstProblem(t, content, "")
	if p.Field != "description" || p.Line != 3 || p.Column != 38 {
		t.Fatalf("position: %s", p)
	}
	for _, want := range []string{`unquoted ": "`, "double quotes", `description: "Review configs. Use when: the user asks"`, ">-"} {
		if !strings.Contains(p.Message, want) {
			t.Fatalf("message %q lacks %q", p.Message, want)
		}
	}
	// The lenient reader still shows the skill.
	doc, probs := ParseLenient([]byte(content))
	if doc == nil || doc.Frontmatter.Name != "review" || !strings.Contains(doc.Frontmatter.Description, "Use when") || len(probs) != 1 {
		t.Fatalf("lenient: %+v %v", doc, probs)
	}
}

func TestLenientReportsAndFailsClosed(t *testing.T) {
	content := "---\nname: a\ndescription: d\nallowed-tools: Bash\nsecrets-autonomous: sometimes\nextra-key: v\n---\n"
	doc, probs := ParseLenient([]byte(content))
	if doc == nil {
		t.Fatal("lenient returned nil document")
	}
	if !doc.Frontmatter.AllowedToolsSet || len(doc.Frontmatter.AllowedTools) != 0 {
		t.Fatalf("malformed allowed-tools must fail closed to []: %+v", doc.Frontmatter)
	}
	if doc.Frontmatter.SecretsAutonomous {
		t.Fatal("malformed secrets-autonomous must read as false")
	}
	if doc.Frontmatter.Extra["extra-key"] != "v" || len(probs) != 3 {
		t.Fatalf("extra %v probs %v", doc.Frontmatter.Extra, probs)
	}
	// Strict refuses the same content.
	if _, err := ParseStrict([]byte(content), ""); err == nil {
		t.Fatal("strict accepted malformed content")
	}
	// Unparseable YAML with a multi-line allowed-tools: still fail closed.
	doc, probs = ParseLenient([]byte("---\nname: a\ndescription: d\nallowed-tools:\n  - x\n  y: [\n---\n"))
	if doc == nil || len(probs) == 0 || !doc.Frontmatter.AllowedToolsSet || len(doc.Frontmatter.AllowedTools) != 0 {
		t.Fatalf("broken yaml: %+v %v", doc, probs)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"a", "a1", "pdf-tools", strings.Repeat("a", 64)} {
		if !ValidName(ok) {
			t.Errorf("%q should be valid", ok)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "a--b", "A", "a_b", "a.b", strings.Repeat("a", 65)} {
		if ValidName(bad) {
			t.Errorf("%q should be invalid", bad)
		}
	}
}

func TestCRLFAndBOM(t *testing.T) {
	content := "\xef\xbb\xbf---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n"
	doc, err := ParseStrict([]byte(content), "a")
	if err != nil || doc.Frontmatter.Description != "d" || doc.BodyLine != 5 {
		t.Fatalf("err=%v doc=%+v", err, doc)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("---\nname: a\ndescription: x: y\n---\n"))
	f.Add([]byte("---\n&a [*a, *a]\n---\n"))
	f.Add([]byte("---\nmetadata: {a: {b: c}}\nallowed-tools: [1, [2]]\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseStrict(data, "x")
		if err == nil {
			if doc == nil || !ValidName(doc.Frontmatter.Name) || doc.Frontmatter.Name != "x" {
				t.Fatalf("strict accepted invalid name: %+v", doc)
			}
			if strings.ContainsAny(doc.Frontmatter.Description, "<>") {
				t.Fatal("strict accepted angle brackets")
			}
		} else {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			for _, p := range e.Problems {
				if p.Field == "" || p.Line < 0 || p.Message == "" {
					t.Fatalf("unlocated problem: %+v", p)
				}
			}
		}
		ParseLenient(data)
	})
}
