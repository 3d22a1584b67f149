package runtimeschema

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/testkit"
)

// corpusTool is one line of mcp-catalog/mcpm-registry/tools.jsonl.
type corpusTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema any    `json:"input_schema"`
	Server      string `json:"server"`
}

func loadCorpus(t *testing.T) []Tool {
	t.Helper()
	path := testkit.SharedData(t, "mcp-catalog/mcpm-registry/tools.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Tool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var ct corpusTool
		if err := json.Unmarshal(sc.Bytes(), &ct); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, Tool{Name: ct.Name, Description: ct.Description, InputSchema: ct.InputSchema})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// profileCounts tallies one profile's outcomes.
type profileCounts struct {
	asIs, normalised, leftOut, invalid, strict, strictFallback int
	kinds                                                      map[Kind]int
	reasons, strictReasons                                     map[string]int
}

// bindAll normalises every tool for every profile, checks each result with
// the profile's validator, and checks determinism and that the input is
// left unchanged.
func bindAll(t *testing.T, tools []Tool) map[ID]*profileCounts {
	t.Helper()
	counts := map[ID]*profileCounts{}
	for _, id := range IDs {
		pc := &profileCounts{kinds: map[Kind]int{}, reasons: map[string]int{}, strictReasons: map[string]int{}}
		counts[id] = pc
		for _, tool := range tools {
			before := compact(tool.InputSchema)
			b, err := Normalize(id, tool)
			if after := compact(tool.InputSchema); after != before {
				t.Fatalf("%s/%s: the input schema was modified", id, tool.Name)
			}
			if err != nil {
				lo, ok := err.(*LeftOut)
				if !ok {
					t.Fatalf("%s/%s: error is not *LeftOut: %v", id, tool.Name, err)
				}
				pc.leftOut++
				pc.reasons[reasonClass(lo.Reason)]++
				continue
			}
			rendered := b.Render()
			if errs := Check(id, rendered); len(errs) > 0 {
				t.Errorf("%s/%s: normalised schema fails the profile's validator:\n  %s\n  in:  %s\n  out: %s",
					id, tool.Name, strings.Join(errs, "\n  "), clip(before, 1500), clip(compact(rendered), 3000))
				pc.invalid++
				continue
			}
			b2, _ := Normalize(id, tool)
			if compact(b2.Render()) != compact(rendered) || fmt.Sprint(b2.Changes) != fmt.Sprint(b.Changes) {
				t.Fatalf("%s/%s: normalisation is not deterministic", id, tool.Name)
			}
			if b.Strict {
				pc.strict++
			}
			if b.StrictFallback != "" {
				pc.strictFallback++
				pc.strictReasons[reasonClass(b.StrictFallback)]++
			}
			if !b.Changed() {
				pc.asIs++
				continue
			}
			pc.normalised++
			for _, k := range b.Kinds() {
				pc.kinds[k]++
			}
		}
	}
	return counts
}

// reasonClass folds a left-out reason onto its class (names and sizes cut).
func reasonClass(r string) string {
	if i := strings.Index(r, " at "); i > 0 {
		r = r[:i]
	}
	if i := strings.IndexAny(r, "0123456789\""); i > 0 {
		return strings.TrimSpace(r[:i])
	}
	return r
}

func report(t *testing.T, title string, counts map[ID]*profileCounts) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n%-20s %8s %10s %8s %8s %15s\n", title, "profile", "as-is", "normalised", "left-out", "strict", "strict-fallback")
	for _, id := range IDs {
		c := counts[id]
		fmt.Fprintf(&sb, "%-20s %8d %10d %8d %8d %15d\n", id, c.asIs, c.normalised, c.leftOut, c.strict, c.strictFallback)
		kinds := make([]string, 0, len(c.kinds))
		for k, v := range c.kinds {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&sb, "    changes by kind (tools): %s\n", strings.Join(kinds, " "))
		for _, r := range sortedKeys(c.reasons) {
			fmt.Fprintf(&sb, "    left out: %s ×%d\n", r, c.reasons[r])
		}
		for _, r := range sortedKeys(c.strictReasons) {
			fmt.Fprintf(&sb, "    strict fallback: %s ×%d\n", r, c.strictReasons[r])
		}
	}
	t.Log(sb.String())
}

// TestCorpus normalises every input schema of the mcpm registry snapshot
// (2,247 real tools/list answers) for every profile.
func TestCorpus(t *testing.T) {
	tools := loadCorpus(t)
	if len(tools) < 2000 {
		t.Fatalf("corpus: %d tools, want the full snapshot", len(tools))
	}
	counts := bindAll(t, tools)
	report(t, fmt.Sprintf("mcpm-registry, %d tools", len(tools)), counts)
	for _, id := range IDs {
		c := counts[id]
		if c.asIs+c.normalised+c.leftOut+c.invalid != len(tools) {
			t.Errorf("%s: counts do not add up", id)
		}
		// The corpus has no schema that cannot be made valid.
		if c.leftOut > 0 {
			t.Errorf("%s: %d tools left out of the real corpus", id, c.leftOut)
		}
	}
	// The mcp profile fixes the root only: the corpus's 22 null and 8 {}
	// schemas, and the ones without properties, need it.
	if counts[MCP].normalised < 30 {
		t.Errorf("mcp: %d normalised, want at least the 30 null/{} schemas", counts[MCP].normalised)
	}
}
