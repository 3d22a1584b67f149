package pgstore

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// contracting are statement shapes that break a replica of the previous
// release still running on the schema (docs/decisions/0080-postgresql-stores.md,
// "Expand/contract"): removing or renaming what it reads, changing a
// column's type, or making writes it does fail.
var contracting = []struct {
	re   *regexp.Regexp
	why  string
	skip *regexp.Regexp // when it also matches, the statement is fine
}{
	{re: regexp.MustCompile(`(?is)\bDROP\s+(TABLE|COLUMN|SCHEMA|VIEW|TYPE)\b`), why: "drops what the previous release reads"},
	{re: regexp.MustCompile(`(?is)\bALTER\s+TABLE\b.*\bDROP\b`), why: "drops what the previous release reads",
		skip: regexp.MustCompile(`(?is)\bDROP\s+(DEFAULT|NOT\s+NULL)\b`)},
	{re: regexp.MustCompile(`(?is)\bRENAME\b`), why: "renames what the previous release reads"},
	{re: regexp.MustCompile(`(?is)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`), why: "changes a column type under the previous release"},
	{re: regexp.MustCompile(`(?is)\bSET\s+NOT\s+NULL\b`), why: "makes the previous release's writes fail"},
	{re: regexp.MustCompile(`(?is)\bADD\s+(COLUMN\s+)?\S+\s+[^,;]*\bNOT\s+NULL\b`), why: "adds a NOT NULL column without a default (the previous release's inserts fail)",
		skip: regexp.MustCompile(`(?is)\bDEFAULT\b|\bGENERATED\b`)},
	{re: regexp.MustCompile(`(?is)\bTRUNCATE\b`), why: "deletes data the previous release reads"},
}

// ContractAnnotation marks a statement of an Up section as a deliberate
// contract step (allowed once no replica of the release that read the old
// shape runs): a line "-- contract: <reason>" before it.
const ContractAnnotation = "-- contract:"

// ContractingStatements lists the statements of the Up sections of the
// goose migrations in fsys that would break the previous release running
// beside the new one, as "file: reason: statement". A statement preceded
// by a ContractAnnotation line is not listed. Every migration must be
// expand-only unless so annotated; the stores' tests assert the list is
// empty.
func ContractingStatements(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		up, ok := upSection(string(b))
		if !ok {
			return nil, fmt.Errorf("%s: no -- +goose Up section", name)
		}
		for _, chunk := range strings.Split(up, ";") {
			if strings.Contains(chunk, ContractAnnotation) {
				continue
			}
			stmt := stripComments(chunk)
			if stmt == "" {
				continue
			}
			for _, c := range contracting {
				if c.re.MatchString(stmt) && (c.skip == nil || !c.skip.MatchString(stmt)) {
					out = append(out, fmt.Sprintf("%s: %s: %s", name, c.why, strings.Join(strings.Fields(stmt), " ")))
					break
				}
			}
		}
	}
	return out, nil
}

// upSection returns the text between "-- +goose Up" and "-- +goose Down"
// (or the end).
func upSection(s string) (string, bool) {
	_, after, ok := strings.Cut(s, "-- +goose Up")
	if !ok {
		return "", false
	}
	up, _, _ := strings.Cut(after, "-- +goose Down")
	return up, true
}

func stripComments(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
