package evalsearch

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane/internal/search"
)

// TestRemoteEmbedderSeam runs the evaluation through the Embedder seam a
// deployment uses for a real model (search.HTTPEmbedder, as
// `toolplane eval search --embedder-url` and catalog.search.embedder do)
// against a local fake OpenAI-compatible /v1/embeddings server that answers
// with the static vectors: AUTO's figures on LiveMCPBench DEV must be the
// static embedder's, so a real model's figures measure the model, not the
// plumbing. About 0.3 s.
func TestRemoteEmbedderSeam(t *testing.T) {
	static, err := search.DefaultEmbedder()
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "fake-static" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		vecs, _ := static.Embed(r.Context(), req.Input)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]item, len(vecs))
		for i, v := range vecs {
			data[i] = item{Index: i, Embedding: v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()
	emb, err := search.NewHTTPEmbedder(search.HTTPEmbedderConfig{URL: srv.URL + "/v1/embeddings", Model: "fake-static"})
	if err != nil {
		t.Fatal(err)
	}
	tools, queries := toolret(t, "livemcpbench")
	run := func(o search.Options) *Metrics {
		rep, err := Evaluate(context.Background(), Options{ToolsPath: tools, QueriesPath: queries, Split: SplitDev, Modes: []string{"auto", "semantic"}, Search: o})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Mode("auto")
	}
	want := run(search.Options{})
	got := run(search.Options{Embedder: search.NewCachedEmbedder(emb, "fake-static", search.NewMemoryCache(0))})
	if requests.Load() == 0 {
		t.Fatal("the fake endpoint was never called")
	}
	if got.R5 != want.R5 || got.NDCG10 != want.NDCG10 || got.MRR != want.MRR {
		t.Fatalf("through the HTTP embedder: R@5 %.3f nDCG@10 %.3f MRR %.3f, static: %.3f %.3f %.3f", got.R5, got.NDCG10, got.MRR, want.R5, want.NDCG10, want.MRR)
	}
	t.Logf("AUTO through a local fake /v1/embeddings: R@5 %.3f nDCG@10 %.3f (%d requests)", got.R5, got.NDCG10, requests.Load())
}
