package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

// tinyTable builds a 4-dimension vector table in which synonyms share a
// direction, so semantic tests do not depend on the committed vectors.
func tinyTable(t testing.TB) *vectors.Table {
	words := []string{"photo", "image", "picture", "smaller", "resize", "shrink", "money", "currency", "dollars", "euros", "convert", "weather", "forecast", "rain"}
	dirs := map[string][]float32{
		"photo": {1, 0, 0, 0}, "image": {1, 0, 0, 0.1}, "picture": {1, 0.1, 0, 0},
		"smaller": {0.7, 0, 0, 0.7}, "resize": {0.7, 0, 0, 0.7}, "shrink": {0.6, 0, 0, 0.8},
		"money": {0, 1, 0, 0}, "currency": {0, 1, 0, 0.1}, "dollars": {0, 1, 0.1, 0}, "euros": {0, 1, 0.1, 0}, "convert": {0, 0.7, 0, 0.7},
		"weather": {0, 0, 1, 0}, "forecast": {0, 0, 1, 0.1}, "rain": {0, 0.1, 1, 0},
	}
	vecs := make([][]float32, len(words))
	counts := make([]uint64, len(words))
	for i, w := range words {
		vecs[i] = dirs[w]
		counts[i] = 10
	}
	var buf bytes.Buffer
	if err := vectors.Encode(&buf, 4, words, counts, vecs); err != nil {
		t.Fatal(err)
	}
	tab, err := vectors.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

var sampleDocs = []Document{
	{Name: "github_create_issue", Server: "github", Description: "Create a new issue in a GitHub repository", ParamNames: []string{"owner", "repo", "title"}},
	{Name: "readFile", OriginalName: "read_file", Server: "filesystem", Description: "Read the complete contents of a file from the file system"},
	{Name: "list_directory", Server: "filesystem", Description: "List files and folders in a directory"},
	{Name: "resize_image", Server: "imaging", Description: "Resize a photo to new dimensions", ParamNames: []string{"width", "height"}},
	{Name: "convert_currency", Server: "finance", Description: "Convert an amount of money between currencies", ParamNames: []string{"amount", "from", "to"}},
	{Name: "get_forecast", Server: "weather", Title: "Weather forecast", Description: "Get the weather forecast for a city"},
	{Name: "slack_send_message", Server: "slack", Description: "Send a message to a Slack channel"},
	{Name: "slack_list_channels", Server: "slack", Description: "List the channels of a Slack workspace"},
}

func newTestIndex(t testing.TB, docs []Document) *Index {
	t.Helper()
	ix := NewIndex(Options{Embedder: NewStaticEmbedder(tinyTable(t)), MinSemanticScore: -1})
	if err := ix.Replace(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return ix
}

var fuzzIndex = func() *Index {
	ix := NewIndex(Options{Embedder: NewStaticEmbedder(tinyTable(&testing.T{}))})
	_ = ix.Replace(context.Background(), sampleDocs)
	return ix
}()

func names(resp *Response) []string {
	out := make([]string, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = r.Name
	}
	return out
}

func search(t *testing.T, ix *Index, req Request) *Response {
	t.Helper()
	resp, err := ix.Search(context.Background(), req)
	if err != nil {
		t.Fatalf("Search(%+v): %v", req, err)
	}
	return resp
}

func TestSelect(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	// Catalog order, not request order; unknown names ignored; limit ignored.
	resp := search(t, ix, Request{Query: "select:slack_send_message, nope ,readFile,github_create_issue", Limit: 1})
	if got, want := names(resp), []string{"github_create_issue", "readFile", "slack_send_message"}; !slices.Equal(got, want) {
		t.Fatalf("select = %v, want %v", got, want)
	}
	// Case-sensitive exact names.
	if got := names(search(t, ix, Request{Query: "select:READFILE"})); len(got) != 0 {
		t.Fatalf("select is case-insensitive: %v", got)
	}
	// Candidates restrict select too.
	resp = search(t, ix, Request{Query: "select:readFile,list_directory", Candidates: []string{"list_directory"}})
	if got := names(resp); !slices.Equal(got, []string{"list_directory"}) {
		t.Fatalf("select with candidates = %v", got)
	}
}

func TestSelectCapAndTruncated(t *testing.T) {
	var docs []Document
	for i := range 30 {
		docs = append(docs, Document{Name: fmt.Sprintf("t%02d", i), Description: "tool"})
	}
	ix := newTestIndex(t, docs)
	var req []string
	for i := 9999; i >= 0; i-- { // 10,000 names, reversed, mostly unknown
		req = append(req, fmt.Sprintf("t%02d", i))
	}
	resp := search(t, ix, Request{Query: "select:" + strings.Join(req, ",")})
	if len(resp.Results) != MaxSelectResults || !resp.Truncated {
		t.Fatalf("got %d results truncated=%v, want %d truncated", len(resp.Results), resp.Truncated, MaxSelectResults)
	}
	if resp.Results[0].Name != "t00" || resp.Results[19].Name != "t19" {
		t.Fatalf("not catalog order: %v", names(resp))
	}
	resp = search(t, ix, Request{Query: "select:t01,t02"})
	if resp.Truncated {
		t.Fatal("truncated set for 2 names")
	}
}

func TestRequired(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	for _, mode := range []Mode{ModeAuto, ModeBM25, ModeRegex, ModeSemantic} {
		resp := search(t, ix, Request{Query: "+SLACK channels", Mode: mode})
		got := names(resp)
		if mode == ModeSemantic { // "channels" has no vector here: catalog order
			slices.Reverse(got)
		}
		// Only slack tools; the one matching the rest first.
		if !slices.Equal(got, []string{"slack_list_channels", "slack_send_message"}) {
			t.Errorf("mode %v: +SLACK channels = %v", mode, got)
		}
	}
	resp := search(t, ix, Request{Query: "+file", Mode: ModeBM25})
	if got := names(resp); !slices.Equal(got, []string{"readFile"}) {
		t.Fatalf("+file = %v", got)
	}
	if got := names(search(t, ix, Request{Query: "+nomatch files"})); len(got) != 0 {
		t.Fatalf("+nomatch = %v", got)
	}
}

func TestRegexDeerFlowCompatible(t *testing.T) {
	docs := []Document{
		{Name: "alpha", Description: "uses the slack api"},
		{Name: "slack_post", Description: "post"},
		{Name: "beta", Description: "SLACK mention"},
		{Name: "c_plus", Description: "compile c++ code"},
	}
	ix := newTestIndex(t, docs)
	resp := search(t, ix, Request{Query: "Slack", Mode: ModeRegex, Limit: 10})
	// Name match scores 2 and comes first; ties keep catalog order.
	if got := names(resp); !slices.Equal(got, []string{"slack_post", "alpha", "beta"}) {
		t.Fatalf("regex = %v", got)
	}
	if resp.Results[0].Score != 2 || resp.Results[1].Score != 1 {
		t.Fatalf("scores = %v %v", resp.Results[0].Score, resp.Results[1].Score)
	}
	// An invalid pattern is matched literally.
	if got := names(search(t, ix, Request{Query: "c++", Mode: ModeRegex})); !slices.Equal(got, []string{"c_plus"}) {
		t.Fatalf("literal fallback = %v", got)
	}
	// A real regex works, over "name description".
	if got := names(search(t, ix, Request{Query: "^beta slack", Mode: ModeRegex})); !slices.Equal(got, []string{"beta"}) {
		t.Fatalf("regex over name+description = %v", got)
	}
	// Natural language is one pattern (docs/deerflow.md §2.3 note).
	if got := names(search(t, ix, Request{Query: "slack api", Mode: ModeRegex})); !slices.Equal(got, []string{"alpha"}) {
		t.Fatalf("phrase pattern = %v", got)
	}
	if _, err := ix.Search(context.Background(), Request{Query: strings.Repeat("a", 200), Mode: ModeRegex}); err != nil {
		t.Fatalf("200-char pattern rejected: %v", err)
	}
	_, err := ix.Search(context.Background(), Request{Query: strings.Repeat("é", 201), Mode: ModeRegex})
	if !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("201-char pattern: err = %v", err)
	}
	// Over 200 characters is fine for ranked modes.
	if _, err := ix.Search(context.Background(), Request{Query: strings.Repeat("slack ", 100), Mode: ModeBM25}); err != nil {
		t.Fatalf("long BM25 query: %v", err)
	}
}

func TestBM25(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	cases := map[string]string{
		"create issue":              "github_create_issue", // name split on _
		"read file contents":        "readFile",            // camelCase split
		"listing directories":       "list_directory",      // stemming
		"Weather forecast for Oslo": "get_forecast",
		"repo owner":                "github_create_issue", // parameter names
	}
	for q, want := range cases {
		resp := search(t, ix, Request{Query: q, Mode: ModeBM25})
		if len(resp.Results) == 0 || resp.Results[0].Name != want {
			t.Errorf("%q: top = %v, want %s", q, names(resp), want)
		}
	}
	resp := search(t, ix, Request{Query: "repo owner", Mode: ModeBM25})
	if !slices.Contains(resp.Results[0].Matched, "parameters") {
		t.Errorf("matched fields = %v, want parameters", resp.Results[0].Matched)
	}
	resp = search(t, ix, Request{Query: "filesystem", Mode: ModeBM25, Limit: 10})
	if got := names(resp); !slices.Equal(got, []string{"readFile", "list_directory"}) || resp.Results[0].Matched[0] != "server" {
		t.Errorf("server field: %v %v", got, resp.Results)
	}
	// Only stop words: nothing.
	if got := names(search(t, ix, Request{Query: "the of and", Mode: ModeBM25})); len(got) != 0 {
		t.Errorf("stop words matched %v", got)
	}
	// Deterministic tie-break: identical documents in catalog order.
	twins := newTestIndex(t, []Document{{Name: "b_tool", Description: "same text"}, {Name: "a_tool", Description: "same text"}})
	if got := names(search(t, twins, Request{Query: "same text", Mode: ModeBM25})); !slices.Equal(got, []string{"b_tool", "a_tool"}) {
		t.Errorf("tie-break = %v", got)
	}
}

func TestLimitDefaults(t *testing.T) {
	var docs []Document
	for i := range 12 {
		docs = append(docs, Document{Name: fmt.Sprintf("tool_%d", i), Description: "common words here"})
	}
	ix := newTestIndex(t, docs)
	for _, limit := range []int{0, -3} {
		if n := len(search(t, ix, Request{Query: "common", Limit: limit}).Results); n != DefaultLimit {
			t.Errorf("limit %d: %d results, want %d", limit, n, DefaultLimit)
		}
	}
	if n := len(search(t, ix, Request{Query: "common", Limit: 11}).Results); n != 11 {
		t.Errorf("limit 11: %d results", n)
	}
	if resp := search(t, ix, Request{Query: "   "}); len(resp.Results) != 0 {
		t.Errorf("empty query returned %v", names(resp))
	}
	if _, err := ix.Search(context.Background(), Request{Query: "x", Mode: Mode(9)}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("bad mode: %v", err)
	}
}

func TestCandidates(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	resp := search(t, ix, Request{Query: "slack", Mode: ModeBM25, Candidates: []string{"slack_list_channels", "unknown"}})
	if got := names(resp); !slices.Equal(got, []string{"slack_list_channels"}) {
		t.Fatalf("candidates = %v", got)
	}
	if got := names(search(t, ix, Request{Query: "slack", Candidates: []string{}})); len(got) != 0 {
		t.Fatalf("empty candidates matched %v", got)
	}
}

func TestSemanticAndAuto(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	// No shared word with "resize_image ... photo": only vectors can tell.
	resp := search(t, ix, Request{Query: "shrink my picture", Mode: ModeSemantic})
	if len(resp.Results) == 0 || resp.Results[0].Name != "resize_image" || !slices.Contains(resp.Results[0].Matched, "semantic") {
		t.Fatalf("semantic = %+v", resp.Results)
	}
	if got := names(search(t, ix, Request{Query: "shrink my picture", Mode: ModeBM25})); len(got) != 0 {
		t.Fatalf("bm25 matched %v (test needs no shared words)", got)
	}
	resp = search(t, ix, Request{Query: "how many euros is 100 dollars", Mode: ModeAuto})
	if len(resp.Results) == 0 || resp.Results[0].Name != "convert_currency" {
		t.Fatalf("auto = %v", names(resp))
	}
	// AUTO keeps lexical hits first when the words match.
	resp = search(t, ix, Request{Query: "slack message", Mode: ModeAuto})
	if resp.Results[0].Name != "slack_send_message" {
		t.Fatalf("auto lexical = %v", names(resp))
	}
}

func TestSemanticThreshold(t *testing.T) {
	ix := NewIndex(Options{Embedder: NewStaticEmbedder(tinyTable(t))})
	if err := ix.Replace(context.Background(), sampleDocs); err != nil {
		t.Fatal(err)
	}
	for _, r := range search(t, ix, Request{Query: "rain", Mode: ModeSemantic, Limit: 20}).Results {
		if r.Score < 0.2 {
			t.Fatalf("result %s below threshold: %v", r.Name, r.Score)
		}
	}
	if got := names(search(t, ix, Request{Query: "zzz qqq", Mode: ModeSemantic})); len(got) != 0 {
		t.Fatalf("unknown words matched %v", got)
	}
}

func TestIncrementalUpdates(t *testing.T) {
	ix := newTestIndex(t, sampleDocs)
	before := ix.Snapshot()
	err := ix.Upsert(context.Background(),
		Document{Name: "readFile", Description: "Open a spreadsheet workbook"},
		Document{Name: "send_email", Description: "Send an email to a recipient"})
	if err != nil {
		t.Fatal(err)
	}
	ix.Remove("slack_send_message", "not_there")
	if got := names(search(t, ix, Request{Query: "spreadsheet", Mode: ModeBM25})); !slices.Equal(got, []string{"readFile"}) {
		t.Fatalf("updated doc not found: %v", got)
	}
	if got := names(search(t, ix, Request{Query: "complete contents", Mode: ModeBM25})); len(got) != 0 {
		t.Fatalf("stale terms still match: %v", got)
	}
	if got := names(search(t, ix, Request{Query: "+slack"})); !slices.Equal(got, []string{"slack_list_channels"}) {
		t.Fatalf("removed doc still found: %v", got)
	}
	// Catalog order: updated doc keeps its place, new doc goes last.
	want := []string{"github_create_issue", "readFile", "list_directory", "resize_image", "convert_currency", "get_forecast", "slack_list_channels", "send_email"}
	if got := ix.Snapshot().Names(); !slices.Equal(got, want) {
		t.Fatalf("order = %v", got)
	}
	// The old snapshot is untouched (copy-on-write).
	resp, err := before.Search(context.Background(), Request{Query: "complete contents", Mode: ModeBM25})
	if err != nil || len(resp.Results) != 1 || resp.Results[0].Name != "readFile" || before.Len() != len(sampleDocs) {
		t.Fatalf("old snapshot changed: %v %v", resp, err)
	}
	if err := ix.Upsert(context.Background(), Document{Name: ""}); !errors.Is(err, ErrInvalidDocument) {
		t.Fatalf("empty name: %v", err)
	}
}

// TestIncrementalEqualsRebuild applies random upserts and removals and
// checks every mode ranks exactly as an index rebuilt from scratch.
func TestIncrementalEqualsRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"file", "read", "write", "issue", "github", "slack", "message", "photo", "resize", "money", "weather", "list", "create", "delete", "search"}
	text := func() string {
		var b []string
		for range 3 + rng.IntN(6) {
			b = append(b, words[rng.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	ix := newTestIndex(t, nil)
	var order []string
	live := map[string]Document{}
	for step := range 400 {
		name := fmt.Sprintf("tool_%d", rng.IntN(120))
		if rng.IntN(4) == 0 {
			ix.Remove(name)
			if _, ok := live[name]; ok {
				delete(live, name)
				order = slices.DeleteFunc(order, func(s string) bool { return s == name })
			}
			continue
		}
		d := Document{Name: name, Description: text(), Server: words[step%len(words)], ParamNames: []string{words[rng.IntN(len(words))]}}
		if err := ix.Upsert(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if _, ok := live[name]; !ok {
			order = append(order, name)
		}
		live[name] = d
	}
	var docs []Document
	for _, n := range order {
		docs = append(docs, live[n])
	}
	fresh := newTestIndex(t, docs)
	if !slices.Equal(ix.Snapshot().Names(), fresh.Snapshot().Names()) {
		t.Fatal("catalog order differs")
	}
	for _, q := range []string{"read file", "github issue create", "slack message list", "photo", "+tool_1 search", "select:tool_3,tool_5", "money weather"} {
		for _, mode := range []Mode{ModeBM25, ModeAuto, ModeRegex, ModeSemantic} {
			a := search(t, ix, Request{Query: q, Mode: mode, Limit: 20})
			b := search(t, fresh, Request{Query: q, Mode: mode, Limit: 20})
			if len(a.Results) != len(b.Results) {
				t.Fatalf("%q %v: %d vs %d results", q, mode, len(a.Results), len(b.Results))
			}
			for i := range a.Results {
				ra, rb := a.Results[i], b.Results[i]
				if ra.Name != rb.Name || abs(ra.Score-rb.Score) > 1e-4 {
					t.Fatalf("%q %v #%d: %v/%v vs %v/%v", q, mode, i, ra.Name, ra.Score, rb.Name, rb.Score)
				}
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestConcurrentSearchDuringUpdates runs searches while writers change the
// index; under -race this checks the copy-on-write publication, and every
// search must see a complete snapshot (one of the two versions of a server).
func TestConcurrentSearchDuringUpdates(t *testing.T) {
	mk := func(v string) []Document {
		var docs []Document
		for i := range 50 {
			docs = append(docs, Document{Name: fmt.Sprintf("srv_tool_%d", i), Server: "srv", Description: v + " version tool"})
		}
		return docs
	}
	ix := newTestIndex(t, mk("alpha"))
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				snap := ix.Snapshot()
				a, _ := snap.Search(ctx, Request{Query: "alpha", Mode: ModeBM25, Limit: 100})
				b, _ := snap.Search(ctx, Request{Query: "beta", Mode: ModeBM25, Limit: 100})
				if n := len(a.Results) + len(b.Results); n != 50 || (len(a.Results) != 0 && len(b.Results) != 0) {
					errc <- fmt.Errorf("half-built snapshot: alpha %d beta %d", len(a.Results), len(b.Results))
					return
				}
			}
		}()
	}
	for i := range 100 {
		v := "alpha"
		if i%2 == 0 {
			v = "beta"
		}
		if err := ix.Upsert(ctx, mk(v)...); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

type failingEmbedder struct{ calls int }

func (f *failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	f.calls++
	return nil, errors.New("model offline")
}

func TestEmbedderFailure(t *testing.T) {
	fe := &failingEmbedder{}
	ix := NewIndex(Options{Embedder: fe})
	err := ix.Replace(context.Background(), sampleDocs)
	if !errors.Is(err, ErrEmbedding) || !strings.Contains(err.Error(), "model offline") {
		t.Fatalf("Replace err = %v, want ErrEmbedding", err)
	}
	// Lexical search still works; AUTO degrades, SEMANTIC fails.
	resp := search(t, ix, Request{Query: "slack message", Mode: ModeAuto})
	if len(resp.Results) == 0 || resp.Results[0].Name != "slack_send_message" {
		t.Fatalf("auto = %v", names(resp))
	}
	if ix.Snapshot().HasVector("slack_send_message") {
		t.Fatal("vector present after failure")
	}
	if _, err := ix.Search(context.Background(), Request{Query: "x", Mode: ModeSemantic}); err != nil {
		t.Fatalf("semantic without vectors should be empty, got %v", err)
	}
}

func TestDefaultVectors(t *testing.T) {
	tab, err := vectors.Default()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Dim != 100 || len(tab.Words) < 30_000 {
		t.Fatalf("dim %d, %d words", tab.Dim, len(tab.Words))
	}
	for _, w := range []string{"file", "directory", "email", "weather"} {
		if tab.Lookup(w) == nil || tab.Prob(w) <= 0 {
			t.Fatalf("word %q missing", w)
		}
	}
	e, err := DefaultEmbedder()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := e.Embed(context.Background(), []string{"List files in a directory", "Show the contents of a folder", "Send an email to a customer"})
	near, far := dot(v[0], v[1]), dot(v[0], v[2])
	if near <= far {
		t.Fatalf("cos(files, folder) = %.2f not above cos(files, email) = %.2f", near, far)
	}
}

func TestParamsFromSchema(t *testing.T) {
	n, d := ParamsFromSchema([]byte(`{"type":"object","properties":{"path":{"type":"string","description":"File path"},"mode":{"title":"Open mode"},"x":{}}}`))
	if !slices.Equal(n, []string{"mode", "path", "x"}) || !slices.Equal(d, []string{"Open mode", "File path"}) {
		t.Fatalf("got %v %v", n, d)
	}
	for _, bad := range []string{"", "null", "{", `{"properties":[1]}`} {
		if n, d := ParamsFromSchema([]byte(bad)); n != nil || d != nil {
			t.Fatalf("%q: %v %v", bad, n, d)
		}
	}
}

func TestSplitWords(t *testing.T) {
	var got []string
	splitWords("getHTMLPage read_file-v2.txt/Path 天气预报 Café", func(w string) { got = append(got, w) })
	want := []string{"get", "html", "page", "read", "file", "v2", "txt", "path", "天", "气", "预", "报", "café"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
}
