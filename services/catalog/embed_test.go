package catalog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

const (
	fakeModel  = "fake-bow-512"
	fakeKeyEnv = "TP_TEST_EMBEDDINGS_KEY"
	fakeKey    = "sk-test-0123456789"
	fakeDim    = 512 // no FNV-1a collision among the test vocabulary (64 had seven)
)

// fakeEmbeddings is a local OpenAI-compatible POST /v1/embeddings: each text
// is a bag of lower-cased words hashed (FNV-1a) into fakeDim dimensions. Its
// synonyms table maps invented words onto real ones, so only this embedder
// (not BM25F, not the static vectors) can relate such a query to a tool.
// It rejects a wrong bearer token or model with 401/400, and answers 503
// while down is set.
type fakeEmbeddings struct {
	t        *testing.T
	srv      *httptest.Server
	down     atomic.Bool
	requests atomic.Int64
	inputs   atomic.Int64
	dims     atomic.Bool // the last request carried "dimensions"
	mu       sync.Mutex
	texts    []string
}

var fakeSynonyms = map[string]string{"zorblax": "weather", "quibbit": "invoice"}

func newFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	f := &fakeEmbeddings{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEmbeddings) url() string { return f.srv.URL + "/v1/embeddings" }

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+fakeKey {
		f.t.Errorf("fake embeddings: Authorization = %q", got)
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
		return
	}
	if f.down.Load() {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions *int     `json:"dimensions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != fakeModel {
		f.t.Errorf("fake embeddings: model %q, decode error %v", req.Model, err)
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	if req.Dimensions != nil && *req.Dimensions != fakeDim {
		f.t.Errorf("fake embeddings: dimensions %d", *req.Dimensions)
		http.Error(w, `{"error":{"message":"unsupported dimensions"}}`, http.StatusBadRequest)
		return
	}
	f.dims.Store(req.Dimensions != nil)
	f.requests.Add(1)
	f.inputs.Add(int64(len(req.Input)))
	f.mu.Lock()
	f.texts = append(f.texts, req.Input...)
	f.mu.Unlock()
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
	}{Object: "list", Model: fakeModel}
	// Answer in reverse order: clients must use "index".
	for i := len(req.Input) - 1; i >= 0; i-- {
		resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: bagOfWords(req.Input[i])})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func bagOfWords(text string) []float32 {
	v := make([]float32, fakeDim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	}) {
		if s, ok := fakeSynonyms[w]; ok {
			w = s
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%fakeDim]++
	}
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	if n > 0 {
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
	}
	return v
}

// embedTools are five static tools with disjoint vocabularies.
var embedTools = []string{
	`{"name": "get_weather", "description": "Weather forecast for a city", "server": "demo"}`,
	`{"name": "send_email", "description": "Send an email message to a recipient", "server": "demo"}`,
	`{"name": "read_file", "description": "Read the contents of a file from disk", "server": "demo"}`,
	`{"name": "create_invoice", "description": "Create an invoice for a customer order", "server": "demo"}`,
	`{"name": "search_web", "description": "Search the web and return page links", "server": "demo"}`,
}

// startEmbedded starts the catalog on dataDir with one static server over
// tools and the fake as its embedder.
func startEmbedded(t *testing.T, f *fakeEmbeddings, dataDir string, tools []string) *harness {
	t.Helper()
	return startEmbeddedDims(t, f, dataDir, tools, 0)
}

// startEmbeddedDims is startEmbedded with catalog.search.embedder.dimensions.
func startEmbeddedDims(t *testing.T, f *fakeEmbeddings, dataDir string, tools []string, dims int) *harness {
	t.Helper()
	static := filepath.Join(dataDir, "tools.jsonl")
	if err := os.WriteFile(static, []byte(strings.Join(tools, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "static", "path": %q}}}`, static), func(c *Config, e *svckit.Env) {
		c.Search.Embedder = EmbedderConfig{URL: f.url(), Model: fakeModel, APIKeyEnv: fakeKeyEnv, BatchSize: 2, Dimensions: dims}
		e.DataDir = dataDir
	})
}

func hitNames(r *catalogv1.SearchToolsResponse) []string {
	var out []string
	for _, h := range r.GetHits() {
		out = append(out, h.GetTool().GetName())
	}
	return out
}

func TestRemoteEmbedderSemanticRanking(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	f := newFakeEmbeddings(t)
	h := startEmbedded(t, f, t.TempDir(), embedTools)
	// Five tools in batches of 2: three requests, five inputs.
	if r, n := f.requests.Load(), f.inputs.Load(); r != 3 || n != 5 {
		t.Fatalf("indexing sent %d requests with %d inputs; want 3 and 5", r, n)
	}
	ctx := ctxT(t)
	for query, want := range map[string]string{"zorblax in paris": "get_weather", "quibbit for my order": "create_invoice"} {
		res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: query, Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
		if err != nil {
			t.Fatalf("SEMANTIC %q: %v", query, err)
		}
		if names := hitNames(res); len(names) == 0 || names[0] != want {
			t.Fatalf("SEMANTIC %q = %v; want %s first", query, names, want)
		}
		if res.Hits[0].GetMatchedFields()[0] != "semantic" {
			t.Errorf("matched fields = %v", res.Hits[0].GetMatchedFields())
		}
	}
	// BM25 knows no invented word: the ranking above came from the fake.
	res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "zorblax", Mode: catalogv1.SearchMode_SEARCH_MODE_BM25})
	if err != nil || len(res.Hits) != 0 {
		t.Fatalf("BM25 zorblax = %v, %v; want no hits", hitNames(res), err)
	}
	// AUTO fuses them: the fake's semantic match surfaces.
	res, err = h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "zorblax"})
	if err != nil || len(res.Hits) == 0 || hitNames(res)[0] != "get_weather" {
		t.Fatalf("AUTO zorblax = %v, %v; want get_weather first", hitNames(res), err)
	}
	// Repeated queries are answered from the in-memory query cache, and
	// query texts are never written to catalog.db.
	before := f.requests.Load()
	if _, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "zorblax", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC}); err != nil {
		t.Fatal(err)
	}
	if f.requests.Load() != before {
		t.Errorf("a repeated query was re-embedded")
	}
	if n, err := h.srv.vectors("").Count(ctx); err != nil || n != len(embedTools) {
		t.Errorf("catalog.db holds %d vectors (%v); want exactly the %d tools", n, err, len(embedTools))
	}
}

func TestRemoteEmbedderVectorsSurviveRestart(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	f := newFakeEmbeddings(t)
	dir := t.TempDir()
	h := startEmbedded(t, f, dir, embedTools)
	if n := f.inputs.Load(); n != int64(len(embedTools)) {
		t.Fatalf("first start embedded %d texts; want %d", n, len(embedTools))
	}
	h.close()

	// Same data dir, same tools: nothing is re-requested.
	f.requests.Store(0)
	f.inputs.Store(0)
	h = startEmbedded(t, f, dir, embedTools)
	if r := f.requests.Load(); r != 0 {
		t.Fatalf("restart with unchanged tools sent %d embedding requests; want 0", r)
	}
	res, err := h.svc.SearchTools(ctxT(t), &catalogv1.SearchToolsRequest{Query: "zorblax", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
	if err != nil || len(res.Hits) == 0 || hitNames(res)[0] != "get_weather" {
		t.Fatalf("SEMANTIC after restart = %v, %v", hitNames(res), err)
	}
	if r, n := f.requests.Load(), f.inputs.Load(); r != 1 || n != 1 {
		t.Fatalf("after restart: %d requests, %d inputs; want only the query (1, 1)", r, n)
	}
	h.close()

	// One tool changed: only it is re-embedded.
	changed := append([]string(nil), embedTools...)
	changed[1] = `{"name": "send_email", "description": "Send an email message with attachments", "server": "demo"}`
	f.inputs.Store(0)
	f.mu.Lock()
	f.texts = nil
	f.mu.Unlock()
	h = startEmbedded(t, f, dir, changed)
	f.mu.Lock()
	texts := f.texts
	f.mu.Unlock()
	if len(texts) != 1 || !strings.Contains(texts[0], "attachments") {
		t.Fatalf("restart with one changed tool embedded %q; want only send_email", texts)
	}
	h.close()

	// Asking for another vector length is another cache key space: every
	// tool is embedded again, with "dimensions" sent, then cached.
	f.inputs.Store(0)
	h = startEmbeddedDims(t, f, dir, changed, fakeDim)
	if n := f.inputs.Load(); n != int64(len(changed)) || !f.dims.Load() {
		t.Fatalf("restart with dimensions %d embedded %d texts (dimensions sent: %v); want %d with dimensions", fakeDim, n, f.dims.Load(), len(changed))
	}
	h.close()
	f.requests.Store(0)
	h = startEmbeddedDims(t, f, dir, changed, fakeDim)
	if r := f.requests.Load(); r != 0 {
		t.Fatalf("second restart with dimensions sent %d requests; want 0", r)
	}
	h.close()
}

func TestRemoteEmbedderDown(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	f := newFakeEmbeddings(t)
	h := startEmbedded(t, f, t.TempDir(), embedTools)
	ctx := ctxT(t)
	f.srv.Close() // the endpoint goes away: connection refused

	// AUTO still answers, lexically.
	res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "weather forecast"})
	if err != nil {
		t.Fatalf("AUTO with the embedder down: %v", err)
	}
	if names := hitNames(res); len(names) == 0 || names[0] != "get_weather" {
		t.Fatalf("AUTO with the embedder down = %v; want get_weather first", names)
	}
	// SEMANTIC reports the failure: UNAVAILABLE, UPSTREAM_ERROR, naming it.
	_, err = h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "weather forecast", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
	if codeOf(err) != codes.Unavailable || reasonOf(err) != "ERROR_REASON_UPSTREAM_ERROR" {
		t.Fatalf("SEMANTIC with the embedder down: %v (%s); want UNAVAILABLE / UPSTREAM_ERROR", err, reasonOf(err))
	}
	if msg := err.Error(); !strings.Contains(msg, "semantic search") || !strings.Contains(msg, "embedding query") {
		t.Errorf("error does not say what failed: %s", msg)
	}
	// The other modes are unaffected.
	if _, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "weather", Mode: catalogv1.SearchMode_SEARCH_MODE_BM25}); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteEmbedderStartsWhileDown: the catalog starts and serves lexically
// while the endpoint fails; tools without vectors are retried on the next
// catalog change.
func TestRemoteEmbedderStartsWhileDown(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	f := newFakeEmbeddings(t)
	f.down.Store(true)
	dir := t.TempDir()
	h := startEmbedded(t, f, dir, embedTools)
	ctx := ctxT(t)
	res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "invoice"})
	if err != nil || len(res.Hits) == 0 || hitNames(res)[0] != "create_invoice" {
		t.Fatalf("AUTO while down = %v, %v", hitNames(res), err)
	}
	_, err = h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "quibbit", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
	if codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "tool vectors unavailable") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("SEMANTIC while down: %v; want UNAVAILABLE naming the missing tool vectors and HTTP 503", err)
	}
	// Queries that do not rank keep their meaning: blank → empty, select: → names.
	for q, want := range map[string]int{"   ": 0, "select:get_weather,nope": 1} {
		res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: q, Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
		if err != nil || len(res.Hits) != want {
			t.Fatalf("SEMANTIC %q while down = %v, %v; want %d hits", q, hitNames(res), err, want)
		}
	}

	// Back up; a catalog change (one more server) retries the missing vectors.
	f.down.Store(false)
	extra := filepath.Join(dir, "extra.jsonl")
	if err := os.WriteFile(extra, []byte(`{"name": "roll_dice", "description": "Roll some dice", "server": "extra"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "static", "path": %q}, "extra": {"type": "static", "path": %q}}}`,
		filepath.Join(dir, "tools.jsonl"), extra)
	if err := os.WriteFile(h.path, []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "quibbit ranks create_invoice semantically", func() bool {
		res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "quibbit", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
		return err == nil && len(res.Hits) > 0 && hitNames(res)[0] == "create_invoice"
	})
	// The reload is debounced (applied once the file is stable for a tick),
	// so the retry above may come before the extra server is applied.
	eventually(t, 10*time.Second, "the extra tool's vector is cached", func() bool {
		n, err := h.srv.vectors("").Count(ctx)
		return err == nil && n == len(embedTools)+1
	})
}

// TestRemoteEmbedderRetriesWithoutChange: missing tool vectors are fetched
// again by the periodic retry, with no catalog change, and only those.
func TestRemoteEmbedderRetriesWithoutChange(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	old := embedRetryInterval
	embedRetryInterval = 200 * time.Millisecond
	t.Cleanup(func() { embedRetryInterval = old })
	f := newFakeEmbeddings(t)
	f.down.Store(true)
	h := startEmbedded(t, f, t.TempDir(), embedTools)
	ctx := ctxT(t)
	f.down.Store(false)
	eventually(t, 10*time.Second, "zorblax ranks get_weather semantically", func() bool {
		res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "zorblax", Mode: catalogv1.SearchMode_SEARCH_MODE_SEMANTIC})
		return err == nil && len(res.Hits) > 0 && hitNames(res)[0] == "get_weather"
	})
	if h.srv.index.docErr.Load() != nil {
		t.Fatal("docErr still set after a successful retry")
	}
	// Retries stop once every tool has a vector: 5 tool texts + 1 query.
	time.Sleep(3 * embedRetryInterval)
	if n := f.inputs.Load(); n != int64(len(embedTools))+1 {
		t.Fatalf("fake embedded %d texts; want %d tools + 1 query", n, len(embedTools))
	}
}

func TestEmbedderConfigValidation(t *testing.T) {
	t.Setenv(fakeKeyEnv, fakeKey)
	cases := []struct {
		e    EmbedderConfig
		want string
	}{
		{EmbedderConfig{URL: "ftp://x/v1/embeddings", Model: "m"}, "catalog.search.embedder.url: must be an absolute http(s) URL"},
		{EmbedderConfig{URL: "/v1/embeddings", Model: "m"}, "catalog.search.embedder.url"},
		{EmbedderConfig{URL: "https://u:p@x/v1/embeddings", Model: "m"}, "catalog.search.embedder.url: must not carry credentials"},
		{EmbedderConfig{URL: "https://x/v1/embeddings"}, "catalog.search.embedder.model: required when url is set"},
		{EmbedderConfig{Model: "m"}, "catalog.search.embedder.url: required when model or api_key_env is set"},
		{EmbedderConfig{URL: "https://x/v1/embeddings", Model: "m", APIKeyEnv: "NOT-A-NAME"}, "catalog.search.embedder.api_key_env"},
		{EmbedderConfig{URL: "https://x/v1/embeddings", Model: "m", Dimensions: -1}, "catalog.search.embedder.dimensions: must be >= 0"},
		{EmbedderConfig{URL: "https://x/v1/embeddings", Model: "m", BatchSize: 5000}, "catalog.search.embedder.batch_size"},
		{EmbedderConfig{URL: "https://x/v1/embeddings", Model: "m", Timeout: -time.Second}, "catalog.search.embedder.timeout: must be > 0"},
	}
	for _, c := range cases {
		cfg := Config{Search: SearchConfig{Embedder: c.e}}
		cfg.SetDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v; want %q", c.e, err, c.want)
		}
	}
	ok := Config{Search: SearchConfig{Embedder: EmbedderConfig{URL: "http://127.0.0.1:1/v1/embeddings", Model: "m", APIKeyEnv: fakeKeyEnv}}}
	ok.SetDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid embedder config rejected: %v", err)
	}
	def := Config{}
	def.SetDefaults()
	if err := def.Validate(); err != nil || def.Search.Embedder.URL != "" {
		t.Fatalf("default config: %v (url %q)", err, def.Search.Embedder.URL)
	}

	// New: an unset key variable or a missing data dir fail at start (fail
	// closed), naming the key; catalog.db always exists (names, pins).
	dir := t.TempDir()
	newWith := func(e EmbedderConfig, dataDir string) error {
		s, err := New(t.Context(), Config{ExtensionsConfig: filepath.Join(dir, "none.json"), Search: SearchConfig{Embedder: e}}, svckit.Env{DataDir: dataDir})
		if err == nil {
			s.Close()
		}
		return err
	}
	t.Setenv("TP_TEST_EMPTY_KEY", "")
	if err := newWith(EmbedderConfig{URL: "http://127.0.0.1:1/v1/embeddings", Model: "m", APIKeyEnv: "TP_TEST_EMPTY_KEY"}, dir); err == nil ||
		!strings.Contains(err.Error(), "catalog.search.embedder.api_key_env") {
		t.Errorf("unset key variable: err = %v", err)
	}
	if err := newWith(EmbedderConfig{URL: "http://127.0.0.1:1/v1/embeddings", Model: "m"}, ""); err == nil ||
		!strings.Contains(err.Error(), "data directory") {
		t.Errorf("no data dir: err = %v", err)
	}
	if err := newWith(EmbedderConfig{}, dir); err != nil {
		t.Fatal(err)
	}
	if err := newWith(EmbedderConfig{URL: "http://127.0.0.1:1/v1/embeddings", Model: "m"}, dir); err != nil {
		t.Fatalf("embedder pointing at a closed port must not fail the catalog: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Errorf("catalog.db not created with an embedder: %v", err)
	}
}
