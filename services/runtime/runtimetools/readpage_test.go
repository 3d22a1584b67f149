package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

const pageBudget = 12000

// dispatchStep runs the real read_file through the Dispatcher, as the
// chain's dispatch step does.
type dispatchStep struct{ d *Dispatcher }

func (dispatchStep) Name() string        { return "dispatch" }
func (dispatchStep) Description() string { return "calls the Dispatcher" }
func (s dispatchStep) Run(ctx context.Context, c *runtimechain.Call, _ runtimechain.Next) (*runtimechain.Outcome, error) {
	return s.d.CallTool(ctx, c)
}

// readVia calls read_file through the output budget (read_file exempt, as
// by default) and the real Dispatcher, and returns what the model gets.
func (f *searchFixture) readVia(t *testing.T, ch *runtimechain.Chain, args map[string]any) (string, bool) {
	t.Helper()
	name := runtimeassembly.ImplNames["file.read"]
	tool := &runtimeassembly.Tool{Name: name, Source: runtimeassembly.SourceConfig, Use: "file.read", Group: "file:read"}
	c := &runtimechain.Call{
		Thread: &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}},
		View:   &runtimeassembly.View{Base: &runtimeassembly.Base{ByName: map[string]*runtimeassembly.Tool{name: tool}}},
		Name:   name, CallID: "c1", Args: args,
	}
	o := ch.Run(context.Background(), c)
	return runtimechain.TextOf(o.Content) + o.Text, o.Kind == runtimev1.ErrorKind_ERROR_KIND_UNSPECIFIED
}

var pageNote = regexp.MustCompile(`\n\[read_file returns at most (\d+) characters per call: this is ([^\]]+)\. Call read_file with start_line=(\d+)(?: and start_char=(\d+))?(?: and end_line=(\d+))? to read on\.\]$`)

// followPages reads path from the start by following every page's note, as
// a model would, and checks each page: within the budget, valid UTF-8,
// its note naming the position it started at and the position right after
// it (computed here from the page's own newlines and characters).
func followPages(t *testing.T, f *searchFixture, path string, endLine int) (string, int) {
	t.Helper()
	return followPagesBudget(t, f, path, endLine, pageBudget, nil)
}

// followPagesBudget is followPages under the output budget budget; each
// page's arguments are passed to seen (when not nil).
func followPagesBudget(t *testing.T, f *searchFixture, path string, endLine, budget int, seen func(map[string]any)) (string, int) {
	t.Helper()
	ch, err := runtimechain.New(runtimechain.OutputBudget{Settings: runtimechain.BudgetSettings{ExternalizeMinChars: budget,
		PreviewHeadChars: 2000, PreviewTailChars: 1000, ExemptTools: []string{"read_file"}}}, dispatchStep{f.d})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	line, char, pages := 1, 0, 0
	for {
		pages++
		if pages > 5000 {
			t.Fatal("paging does not end")
		}
		args := map[string]any{"path": path}
		if pages > 1 {
			args["start_line"] = float64(line)
			if char > 0 {
				args["start_char"] = float64(char)
			}
		}
		if endLine > 0 {
			args["end_line"] = float64(endLine)
		}
		if seen != nil {
			seen(args)
		}
		out, ok := f.readVia(t, ch, args)
		if !ok {
			t.Fatalf("page %d (start_line=%d start_char=%d): the hint was refused: %.300s", pages, line, char, out)
		}
		if n := utf8.RuneCountInString(out); n > budget {
			t.Fatalf("page %d is %d characters, over the budget %d", pages, n, budget)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("page %d is not valid UTF-8: a character was split", pages)
		}
		m := pageNote.FindStringSubmatch(out)
		if m == nil {
			all.WriteString(out)
			return all.String(), pages
		}
		page := strings.TrimSuffix(out, m[0])
		all.WriteString(page)
		// Where this page ends, from its own text.
		nl := strings.Count(page, "\n")
		nextLine, nextChar := line+nl, utf8.RuneCountInString(page[strings.LastIndexByte(page, '\n')+1:])
		if nl == 0 {
			nextChar += char
		}
		gotLine, _ := strconv.Atoi(m[3])
		gotChar, _ := strconv.Atoi(m[4]) // "" → 0
		if gotLine != nextLine || gotChar != nextChar {
			t.Fatalf("page %d (from line %d char %d, %q…%q): hint start_line=%d start_char=%d, want %d/%d", pages, line, char,
				page[:20], page[len(page)-20:], gotLine, gotChar, nextLine, nextChar)
		}
		if endLine > 0 && m[5] != strconv.Itoa(endLine) {
			t.Fatalf("page %d: the hint dropped end_line: %q", pages, m[0])
		}
		if want := fmt.Sprintf("line %d", line); !strings.HasPrefix(strings.TrimPrefix(m[2], "lines "), strings.TrimPrefix(want, "line ")) && !strings.HasPrefix(m[2], want) {
			t.Fatalf("page %d: range %q does not start at line %d", pages, m[2], line)
		}
		if char > 0 && !strings.Contains(m[2], fmt.Sprintf("character %d", char)) && !strings.Contains(m[2], fmt.Sprintf("characters %d-", char)) {
			t.Fatalf("page %d: range %q does not name start character %d", pages, m[2], char)
		}
		line, char = nextLine, nextChar
	}
}

// read_file pages within a line: a saved single-line 3.3 MB JSON result
// (multi-byte characters included) and a 20 MiB multi-line file with some
// lines longer than a page are read to their end by following the notes,
// every page within the budget. The 20 MiB file is the long form
// (TOOLPLANE_READ_FULL=1, make test-read-paging); go test reads 3.3 MB and
// 2 MiB, and 1 MB and 512 KiB under -race or -short.
func TestReadFileFollowHintsToTheEnd(t *testing.T) {
	f := newSearchFixture(t)
	single := func(size int) string {
		var b strings.Builder
		b.WriteString(`{"rows":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%d,"name":"row %07d — café 日本 🎉"}`, i, i)
		}
		b.WriteString("]}")
		return b.String()
	}
	read := func(t *testing.T, rel, content string, capped bool) {
		f.write(t, rel, content)
		f.d.cfg.ReadPageChars = 0
		if capped { // as wired: read_file itself stops one character past the budget
			f.d.cfg.ReadPageChars = pageBudget
		}
		start := time.Now()
		got, pages := followPages(t, f, "/mnt/user-data/"+rel, 0)
		if got != content {
			t.Fatalf("read %d of %d bytes in %d pages", len(got), len(content), pages)
		}
		t.Logf("%d bytes: %d pages in %v", len(content), pages, time.Since(start))
	}
	// Under -race (CI's make test) the sizes shrink: the race detector
	// makes each page's character walk several times slower.
	one, multi := 3_300_000, 2<<20
	if raceEnabled || testing.Short() {
		one, multi = 1_000_000, 512<<10
	}
	if os.Getenv("TOOLPLANE_READ_FULL") != "" {
		one, multi = 3_300_000, 20<<20
	}
	t.Run("single line", func(t *testing.T) {
		read(t, "outputs/.tool-results/report-0123456789ab.txt", single(one), true)
	})
	t.Run("single line, the budget's pager alone", func(t *testing.T) {
		read(t, "outputs/.tool-results/report-0123456789ac.txt", single(200_000), false)
	})
	t.Run("multi-line with long lines", func(t *testing.T) {
		var big strings.Builder
		for i := 1; big.Len() < multi; i++ {
			fmt.Fprintf(&big, "line %07d of a twenty mebibyte file, ünïcödé ✓\n", i)
			if i%5000 == 0 { // some lines longer than a page
				big.WriteString(strings.Repeat("é", 30000) + "\n")
			}
		}
		read(t, "workspace/big.txt", big.String(), true)
	})
}

// Following read_file's notes never repeats a loop-guard key
// (runtimeloop.LoopKey): files of 6,000- and 1,000-character lines, read
// with the default budget and with 400-600 character budgets, page to
// their end with every page a different call; the guard would force-stop
// a model that repeats a key five times.
func TestReadFileHintsNeverRepeatALoopKey(t *testing.T) {
	f := newSearchFixture(t)
	f.d.cfg.ReadPageChars = 0
	for _, c := range []struct {
		name          string
		lines, length int
		budget        int
	}{{"fifteen 6000-character lines", 15, 6000, pageBudget}, {"fifteen 6000-character lines, budget 600", 15, 6000, 600},
		{"forty 1000-character lines", 40, 1000, pageBudget}, {"forty 1000-character lines, budget 400", 40, 1000, 400},
		{"forty 1000-character lines, budget 500", 40, 1000, 500}} {
		t.Run(c.name, func(t *testing.T) {
			var content strings.Builder
			for i := range c.lines {
				content.WriteString(strings.Repeat(string(rune('a'+i%26)), c.length) + "\n")
			}
			rel := fmt.Sprintf("workspace/lines-%d-%d-%d.txt", c.lines, c.length, c.budget)
			f.write(t, rel, content.String())
			keys := map[string]int{}
			got, pages := followPagesBudget(t, f, "/mnt/user-data/"+rel, 0, c.budget, func(args map[string]any) {
				st, err := structpb.NewStruct(args)
				if err != nil {
					t.Fatal(err)
				}
				k := runtimeloop.LoopKey(&runtimev1.ToolCall{Name: "read_file", Arguments: st})
				keys[k]++
				if keys[k] > 1 {
					t.Fatalf("page %d (%v) repeats the loop key %q of an earlier page", len(keys), args, k)
				}
			})
			if got != content.String() || pages < 2 {
				t.Fatalf("read %d of %d bytes in %d pages", len(got), content.Len(), pages)
			}
			t.Logf("%d pages, %d keys", pages, len(keys))
		})
	}
}

// A note's range and hint for each way a page can end, and an end_line
// carried on.
func TestReadFileRanges(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "workspace/a.txt", "ab\n"+strings.Repeat("x", 20000)+"\ncd\n")
	ch, err := runtimechain.New(runtimechain.OutputBudget{Settings: runtimechain.BudgetSettings{ExternalizeMinChars: pageBudget,
		PreviewHeadChars: 2000, PreviewTailChars: 1000, ExemptTools: []string{"read_file"}}}, dispatchStep{f.d})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "this is line 1 through line 2 character 11696. Call read_file with start_line=2 and start_char=11697 to read on.]"},
		{map[string]any{"start_line": 2.0, "end_line": 3.0}, "this is line 2, characters 0-11699. Call read_file with start_line=2 and start_char=11700 and end_line=3 to read on.]"},
		{map[string]any{"start_line": 2.0, "start_char": 11700.0}, ""}, // the rest fits
		{map[string]any{"start_line": 2.0, "start_char": 2.0}, "this is line 2, characters 2-11701. Call read_file with start_line=2 and start_char=11702 to read on.]"},
		{map[string]any{"start_line": 1.0, "start_char": 1.0, "end_line": 1.0}, ""}, // "b\n" fits

	} {
		c.args["path"] = "/mnt/user-data/workspace/a.txt"
		out, ok := f.readVia(t, ch, c.args)
		if !ok || !strings.HasSuffix(out, c.want) || (c.want == "" && strings.Contains(out, "[read_file returns")) {
			t.Errorf("%v: %v %.200q…%q", c.args, ok, out, out[max(0, len(out)-200):])
		}
	}
	// Out of range and malformed positions are refused, naming the field.
	for args, want := range map[string]string{
		`{"start_line":2,"start_char":20001}`: "start_char 20001 is past the end of line 2 (20001 characters, counting its newline)",
		`{"start_line":9}`:                    "outside the file (3 lines)",
		`{"start_char":-1}`:                   "start_char must be an integer >= 0",
		`{"start_char":"5"}`:                  "start_char must be an integer >= 0",
		`{"start_char":1.5}`:                  "start_char must be an integer >= 0",
	} {
		var a map[string]any
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatal(err)
		}
		a["path"] = "/mnt/user-data/workspace/a.txt"
		if out, ok := f.readVia(t, ch, a); ok || !strings.Contains(out, want) {
			t.Errorf("%s: %v %q", args, ok, out)
		}
	}
	// The newline of a line is a position: a page may start on it.
	if out, ok := f.readVia(t, ch, map[string]any{"path": "/mnt/user-data/workspace/a.txt", "start_line": 1.0, "start_char": 2.0}); !ok || !strings.HasPrefix(out, "\nxxx") ||
		!strings.HasSuffix(out, "this is line 1 from character 2 through line 2 character 11698. Call read_file with start_line=2 and start_char=11699 to read on.]") {
		t.Errorf("from the newline: %v %.100q", ok, out[max(0, len(out)-200):])
	}
}
