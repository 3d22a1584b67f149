package search

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestParseQuery(t *testing.T) {
	cases := []struct {
		in   string
		want Query
	}{
		{"", Query{Kind: KindEmpty}},
		{" \t\n", Query{Kind: KindEmpty}},
		{"select:", Query{Kind: KindEmpty}},
		{"select: , ,", Query{Kind: KindEmpty}},
		{"select:a, b ,a,,c", Query{Kind: KindSelect, Names: []string{"a", "b", "c"}}},
		{"  select:Read_File  ", Query{Kind: KindSelect, Names: []string{"Read_File"}}},
		{"Select:a", Query{Kind: KindRanked, Text: "Select:a"}},
		{"+", Query{Kind: KindEmpty}},
		{"+   ", Query{Kind: KindEmpty}},
		{"+Slack", Query{Kind: KindRequired, Required: "slack"}},
		{"+Slack send  message ", Query{Kind: KindRequired, Required: "slack", Text: "send  message"}},
		{"+ github\tcreate issue", Query{Kind: KindRequired, Required: "github", Text: "create issue"}},
		{"  notebook jupyter ", Query{Kind: KindRanked, Text: "notebook jupyter"}},
	}
	for _, c := range cases {
		got, err := ParseQuery(c.in)
		if err != nil {
			t.Fatalf("ParseQuery(%q): %v", c.in, err)
		}
		if got.Kind != c.want.Kind || got.Required != c.want.Required || got.Text != c.want.Text || !slices.Equal(got.Names, c.want.Names) {
			t.Errorf("ParseQuery(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseQueryLimits(t *testing.T) {
	if _, err := ParseQuery(strings.Repeat("a", MaxQueryBytes)); err != nil {
		t.Fatalf("4096-byte query rejected: %v", err)
	}
	_, err := ParseQuery(strings.Repeat("a", MaxQueryBytes+1))
	var qe *QueryError
	if !errors.Is(err, ErrInvalidQuery) || !errors.As(err, &qe) || qe.Field != "query" {
		t.Fatalf("4097-byte query: err = %v, want QueryError on field query", err)
	}
	if _, err := ParseQuery("+" + strings.Repeat("a", MaxQueryBytes)); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("long +required query: err = %v", err)
	}
	if _, err := ParseQuery("find \xff\xfe tools"); !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("invalid UTF-8: err = %v", err)
	}
	// A select with 10,000 names is far beyond 4 KiB but accepted.
	names := make([]string, 10_000)
	for i := range names {
		names[i] = "tool_" + strings.Repeat("x", i%7)
	}
	if q, err := ParseQuery("select:" + strings.Join(names, ",")); err != nil || q.Kind != KindSelect {
		t.Fatalf("big select: %v %v", q.Kind, err)
	}
	if _, err := ParseQuery("select:" + strings.Repeat("a,", MaxSelectQueryBytes)); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("select over 1 MiB: err = %v", err)
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"": ModeAuto, "AUTO": ModeAuto, "regex": ModeRegex, "bm25": ModeBM25, " Semantic ": ModeSemantic} {
		got, err := ParseMode(s)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
		if s != "" && strings.TrimSpace(strings.ToLower(s)) != got.String() {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if _, err := ParseMode("fuzzy"); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("ParseMode(fuzzy) err = %v", err)
	}
}

// FuzzParseQuery checks the parser's invariants on arbitrary input; the
// seed corpus runs in every `go test`.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "select:a,b", "+x y", "+", "select:,,", "a|b(", "\xff", "+\u00a0x", "select:" + strings.Repeat("n,", 50), "  +Slack  send "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := ParseQuery(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("error %v does not match ErrInvalidQuery", err)
			}
			if utf8.ValidString(raw) && len(raw) <= MaxQueryBytes {
				t.Fatalf("valid short query %q rejected: %v", raw, err)
			}
			return
		}
		if !utf8.ValidString(raw) {
			t.Fatalf("invalid UTF-8 accepted")
		}
		switch q.Kind {
		case KindEmpty:
		case KindSelect:
			if len(q.Names) == 0 {
				t.Fatalf("select without names")
			}
			seen := map[string]bool{}
			for _, n := range q.Names {
				if n == "" || n != strings.TrimSpace(n) || strings.Contains(n, ",") || seen[n] {
					t.Fatalf("bad select name %q in %q", n, raw)
				}
				seen[n] = true
			}
		case KindRequired:
			if q.Required == "" || q.Required != strings.ToLower(q.Required) || strings.IndexFunc(q.Required, unicode.IsSpace) >= 0 {
				t.Fatalf("bad required %q", q.Required)
			}
			if q.Text != strings.TrimSpace(q.Text) {
				t.Fatalf("untrimmed text %q", q.Text)
			}
		case KindRanked:
			if q.Text == "" || q.Text != strings.TrimSpace(q.Text) || len(q.Text) > MaxQueryBytes {
				t.Fatalf("bad ranked text %q", q.Text)
			}
		}
		// Searching never panics and respects the limits.
		resp, err := fuzzIndex.Search(t.Context(), Request{Query: raw, Mode: Mode(len(raw) % 4), Limit: 3})
		if err != nil {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Fatalf("search error %v", err)
			}
			return
		}
		if max := 3; q.Kind == KindSelect {
			if len(resp.Results) > MaxSelectResults {
				t.Fatalf("select returned %d", len(resp.Results))
			}
		} else if len(resp.Results) > max {
			t.Fatalf("%d results over limit", len(resp.Results))
		}
	})
}
