package search

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeEmbeddings is a local OpenAI-compatible /v1/embeddings server: the
// vector of a text is [len(text), count of 'a', 1], returned in reverse
// order to check that the client orders by "index".
func fakeEmbeddings(t *testing.T, requests *atomic.Int32) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sekret" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "test-embed" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
			Object    string    `json:"object"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- {
			s := req.Input[i]
			data = append(data, item{Index: i, Object: "embedding", Embedding: []float32{float32(len(s)), float32(strings.Count(s, "a")), 1}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
}

func TestHTTPEmbedder(t *testing.T) {
	var n atomic.Int32
	srv := fakeEmbeddings(t, &n)
	defer srv.Close()
	t.Setenv("TEST_EMBED_KEY", "sekret")
	e, err := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL + "/v1/embeddings", Model: "test-embed", APIKeyEnv: "TEST_EMBED_KEY", BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(context.Background(), []string{"a", "bb", "aaa"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || vecs[0][0] != 1 || vecs[1][0] != 2 || vecs[2][1] != 3 {
		t.Fatalf("vectors = %v", vecs)
	}
	if n.Load() != 2 {
		t.Fatalf("%d requests, want 2 batches", n.Load())
	}

	// Wrong key → error naming the HTTP status, wrapped as ErrEmbedding by the index.
	t.Setenv("TEST_EMBED_KEY", "wrong")
	bad, err := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL + "/v1/embeddings", Model: "test-embed", APIKeyEnv: "TEST_EMBED_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Embed(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("unauthorized: %v", err)
	}
	ix := NewIndex(Options{Embedder: bad})
	if err := ix.Upsert(context.Background(), Document{Name: "t", Description: "x"}); !errors.Is(err, ErrEmbedding) {
		t.Fatalf("index upsert: %v", err)
	}
}

func TestHTTPEmbedderConfigAndBadResponses(t *testing.T) {
	for _, cfg := range []HTTPEmbedderConfig{
		{URL: "", Model: "m"},
		{URL: "ftp://x/v1/embeddings", Model: "m"},
		{URL: "http://127.0.0.1:1/v1/embeddings"},
		{URL: "http://127.0.0.1:1/v1/embeddings", Model: "m", APIKeyEnv: "TOOLPLANE_TEST_UNSET_KEY"},
	} {
		if _, err := NewHTTPEmbedder(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	responses := map[string]string{
		"count":     `{"data":[]}`,
		"index":     `{"data":[{"index":5,"embedding":[1]}]}`,
		"empty":     `{"data":[{"index":0,"embedding":[]}]}`,
		"malformed": `{"data":`,
	}
	for name, body := range responses {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
		e, err := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL + "/v1/embeddings", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(context.Background(), []string{"x"}); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
		srv.Close()
	}
	// Dimension mismatch between vectors.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]}`))
	}))
	defer srv.Close()
	e, _ := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL, Model: "m"})
	if _, err := e.Embed(context.Background(), []string{"x", "y"}); err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Errorf("dimension mismatch: %v", err)
	}
}

func TestCachedEmbedderAndSemanticIndex(t *testing.T) {
	var n atomic.Int32
	srv := fakeEmbeddings(t, &n)
	defer srv.Close()
	t.Setenv("TEST_EMBED_KEY", "sekret")
	he, err := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL + "/v1/embeddings", Model: "test-embed", APIKeyEnv: "TEST_EMBED_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewMemoryCache(0)
	ce := NewCachedEmbedder(he, he.Model(), cache)
	ix := NewIndex(Options{Embedder: ce, MinSemanticScore: -1})
	docs := []Document{{Name: "a_tool", Description: "aaaa"}, {Name: "b_tool", Description: "bbbb"}}
	if err := ix.Replace(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	if cache.Len() != 2 || n.Load() != 1 {
		t.Fatalf("cache %d entries after %d requests", cache.Len(), n.Load())
	}
	// Unchanged documents keep their vectors: no new request.
	if err := ix.Upsert(context.Background(), docs...); err != nil || n.Load() != 1 {
		t.Fatalf("re-upsert: %v, %d requests", err, n.Load())
	}
	// A new index with the same cache embeds nothing again.
	ix2 := NewIndex(Options{Embedder: ce, MinSemanticScore: -1})
	if err := ix2.Replace(context.Background(), docs); err != nil || n.Load() != 1 {
		t.Fatalf("cached rebuild: %v, %d requests", err, n.Load())
	}
	resp, err := ix.Search(context.Background(), Request{Query: "aaaaaaa", Mode: ModeSemantic})
	if err != nil || len(resp.Results) == 0 {
		t.Fatalf("semantic via HTTP embedder: %v %v", resp, err)
	}
	if VectorKey("m1", "t") == VectorKey("m2", "t") || VectorKey("m", "t") != VectorKey("m", "t") {
		t.Fatal("VectorKey must depend on model and be stable")
	}
}

func TestSemanticQueryEmbedFailure(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var req struct{ Input []string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		var data []map[string]any
		for i, s := range req.Input {
			data = append(data, map[string]any{"index": i, "embedding": []float32{float32(len(s)), 1}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()
	e, _ := NewHTTPEmbedder(HTTPEmbedderConfig{URL: srv.URL, Model: "m"})
	ix := NewIndex(Options{Embedder: e})
	if err := ix.Replace(context.Background(), sampleDocs); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := ix.Search(context.Background(), Request{Query: "slack", Mode: ModeSemantic}); !errors.Is(err, ErrEmbedding) {
		t.Fatalf("semantic: %v", err)
	}
	resp, err := ix.Search(context.Background(), Request{Query: "slack message", Mode: ModeAuto})
	if err != nil || resp.Degraded == "" || len(resp.Results) == 0 || resp.Results[0].Name != "slack_send_message" {
		t.Fatalf("auto fallback: %+v %v", resp, err)
	}
}

func TestStaticEmbedderStemFallback(t *testing.T) {
	tab := tinyTable(t)
	plain, fb := NewStaticEmbedder(tab), NewStaticEmbedderStemFallback(tab)
	embed := func(e *StaticEmbedder, s string) []float32 {
		v, err := e.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	isZero := func(v []float32) bool {
		for _, x := range v {
			if x != 0 {
				return false
			}
		}
		return true
	}
	for _, c := range []struct{ unknown, known string }{
		{"photos", "photo"},         // the stem is a vocabulary word
		{"resizing", "resize"},      // the stem "resiz" is not: the word that has it
		{"forecasting", "forecast"}, // -ing
		{"Currencies", "currency"},  // case and plural
	} {
		if !isZero(embed(plain, c.unknown)) {
			t.Errorf("plain embedder: %q should be unknown", c.unknown)
		}
		got, want := embed(fb, c.unknown), embed(fb, c.known)
		if isZero(got) || !slices.Equal(got, want) {
			t.Errorf("fallback: %q embeds as %v, want %q's %v", c.unknown, got, c.known, want)
		}
	}
	for _, w := range []string{"zebra", "ab", "naïve"} {
		if v := embed(fb, w); !isZero(v) {
			t.Errorf("fallback: %q has no relative in the vocabulary, got %v", w, v)
		}
	}
	// A known word is never replaced by a relative.
	if got, want := embed(fb, "photo shrink"), embed(plain, "photo shrink"); !slices.Equal(got, want) {
		t.Errorf("known words: fallback %v, plain %v", got, want)
	}
}
