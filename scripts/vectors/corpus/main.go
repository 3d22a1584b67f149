// Command corpus writes the in-domain text for training the static word
// vectors (docs/search.md, "Static word vectors"): one line per MCP tool of
// the catalogs given with -catalog, the tool's name words, description and
// parameter descriptions.
//
// Left out, so that no evaluated text is trained on:
//   - every tool whose description (trimmed) occurs in an -exclude file (the
//     toolret tool sets) or whose bare name is a tool name of one of them;
//   - every tool of the catalog benchmark's bench part (the servers of
//     -bench-catalog that evalsearch.IsCatalogTrainServer puts there), and
//     every tool of another catalog whose description is one of theirs.
//
// Usage:
//
//	go run ./scripts/vectors/corpus -bench-catalog mcpm/tools.jsonl \
//	  -catalog mcpm/tools.jsonl -catalog toolsdk/tools.jsonl \
//	  -exclude livemcpbench/tools.jsonl -exclude metatool/tools.jsonl > domain.txt
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"

	"github.com/toolplane/toolplane/internal/evalsearch"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Server      *string         `json:"server"`
}

func read(path string) []tool {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var out []tool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var t tool
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			log.Fatalf("%s: %v", path, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	return out
}

// bare strips a "<server>__" prefix the data conversion added.
func bare(name string) string {
	if i := strings.LastIndex(name, "__"); i >= 0 {
		return name[i+2:]
	}
	return name
}

func main() {
	var catalogs, excludes listFlag
	flag.Var(&catalogs, "catalog", "tools JSONL file to take text from, repeatable")
	flag.Var(&excludes, "exclude", "tools JSONL file whose descriptions and names are left out, repeatable")
	benchCatalog := flag.String("bench-catalog", "", "the catalog the catalog benchmark is built from (its bench part is left out)")
	flag.Parse()
	if len(catalogs) == 0 || len(excludes) == 0 || *benchCatalog == "" {
		log.Fatal("corpus: -catalog, -exclude and -bench-catalog are required")
	}
	w := bufio.NewWriter(os.Stdout)
	kept, dropped := write(w, catalogs, excludes, *benchCatalog)
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "corpus: %d tools kept, %d left out\n", kept, dropped)
}

// write writes the corpus lines of catalogs to w, leaving out what the
// package comment says, and counts the tools kept and left out.
func write(w io.Writer, catalogs, excludes []string, benchCatalog string) (kept, dropped int) {
	badDesc, badName := map[string]bool{}, map[string]bool{}
	for _, p := range excludes {
		for _, t := range read(p) {
			if d := strings.TrimSpace(t.Description); d != "" {
				badDesc[d] = true
			}
			badName[bare(t.Name)] = true
		}
	}
	inBench := func(t tool) bool { return t.Server != nil && !evalsearch.IsCatalogTrainServer(*t.Server) }
	for _, t := range read(benchCatalog) {
		if inBench(t) {
			if d := strings.TrimSpace(t.Description); d != "" {
				badDesc[d] = true
			}
		}
	}
	for _, p := range catalogs {
		for _, t := range read(p) {
			d := strings.TrimSpace(t.Description)
			if badDesc[d] || badName[bare(t.Name)] || p == benchCatalog && inBench(t) {
				dropped++
				continue
			}
			parts := []string{strings.NewReplacer("_", " ", "-", " ", ".", " ", "/", " ").Replace(bare(t.Name)), d}
			parts = append(parts, paramDescriptions(t.InputSchema)...)
			if line := strings.Join(strings.Fields(strings.Join(parts, " ")), " "); line != "" {
				fmt.Fprintln(w, line)
				kept++
			}
		}
	}
	return kept, dropped
}

func paramDescriptions(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if d := strings.TrimSpace(s.Properties[n].Description); d != "" {
			out = append(out, d)
		}
	}
	return out
}
