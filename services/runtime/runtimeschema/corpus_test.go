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

// corpusSampleEvery is the short form's stride: one tool in this many of
// every shape class.
const corpusSampleEvery = 8

// shapeClass is a tool's input-schema shape, the stratum of the short form's
// sample (every class is kept, the awkward ones are rare).
func shapeClass(schema any) string {
	m, ok := schema.(map[string]any)
	switch {
	case schema == nil:
		return "null"
	case !ok:
		return "not-an-object"
	case len(m) == 0:
		return "empty"
	}
	c := compact(schema)
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, root := m[k]; root {
			return "root-union"
		}
	}
	switch {
	case m["type"] != "object":
		return "root-not-object"
	case m["properties"] == nil:
		return "no-properties"
	case strings.Contains(c, `"$ref"`):
		return "ref"
	case strings.Contains(c, `"anyOf"`) || strings.Contains(c, `"oneOf"`) || strings.Contains(c, `"allOf"`):
		return "nested-union"
	case strings.Contains(c, `"additionalProperties"`):
		return "additional-properties"
	}
	return "plain"
}

// sampleCorpus is the short form: one in corpusSampleEvery tools of each
// shape class (at least one per class), in corpus order.
func sampleCorpus(tools []Tool) []Tool {
	seen := map[string]int{}
	var out []Tool
	for _, tool := range tools {
		c := shapeClass(tool.InputSchema)
		if seen[c]%corpusSampleEvery == 0 {
			out = append(out, tool)
		}
		seen[c]++
	}
	return out
}

// TestCorpus normalises every input schema of the mcpm registry snapshot
// (2,247 real tools/list answers) for every profile. Under the race
// detector or -short it runs a stratified sample (sampleCorpus, about an
// eighth: ~3 s instead of ~50 s under -race); `make test-corpus` (or
// TOOLPLANE_CORPUS_FULL=1) runs the whole corpus. The per-profile counts
// are logged in both forms.
func TestCorpus(t *testing.T) {
	all := loadCorpus(t)
	if len(all) < 2000 {
		t.Fatalf("corpus: %d tools, want the full snapshot", len(all))
	}
	tools, form := all, "full"
	if (raceEnabled || testing.Short()) && os.Getenv("TOOLPLANE_CORPUS_FULL") == "" {
		tools, form = sampleCorpus(all), "stratified sample"
		classes := map[string]bool{}
		for _, tool := range all {
			classes[shapeClass(tool.InputSchema)] = true
		}
		got := map[string]bool{}
		for _, tool := range tools {
			got[shapeClass(tool.InputSchema)] = true
		}
		if len(got) != len(classes) || len(tools) > len(all)/corpusSampleEvery+len(classes) {
			t.Fatalf("sample: %d tools over %d of %d shape classes", len(tools), len(got), len(classes))
		}
	}
	counts := bindAll(t, tools)
	report(t, fmt.Sprintf("mcpm-registry, %s: %d of %d tools", form, len(tools), len(all)), counts)
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
	// schemas, and the ones without properties, need it (the sample keeps
	// an eighth of each class).
	if want := 30 * len(tools) / len(all); counts[MCP].normalised < want {
		t.Errorf("mcp: %d normalised, want at least %d of the null/{} schemas", counts[MCP].normalised, want)
	}
}
