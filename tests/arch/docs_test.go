package arch

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every decision record is listed in docs/decisions/README.md, every listed
// record exists, and no two records share a number (docs/README.md says the
// index is the way in).
func TestDecisionIndex(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "decisions")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9][0-9][0-9]-*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no decision records found in %s (%v)", dir, err)
	}
	byNumber := map[string]string{}
	for _, f := range files {
		base := filepath.Base(f)
		n := base[:4]
		if other, dup := byNumber[n]; dup {
			t.Errorf("decision number %s used twice: %s and %s", n, other, base)
		}
		byNumber[n] = base
		if !strings.Contains(string(index), "]("+base+")") {
			t.Errorf("%s is not listed in docs/decisions/README.md", base)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(([0-9]{4}-[^)]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			t.Errorf("docs/decisions/README.md links %s, which does not exist", m[1])
		}
	}
}
