package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolplane/toolplane/internal/search"
)

// queryVectorCacheSize bounds the in-memory cache of query vectors.
const queryVectorCacheSize = 4096

// remoteEmbedder is the remote embedder of catalog.search.embedder with the
// resources it holds.
type remoteEmbedder struct {
	// embedder is the HTTP embedder behind a CachedEmbedder (tieredCache).
	embedder search.Embedder
	// transport is the embedder's own HTTP transport (its idle connections
	// are closed with the service).
	transport *http.Transport
}

// close releases idle connections (the store is the service's).
func (r *remoteEmbedder) close() {
	r.transport.CloseIdleConnections()
}

// newEmbedder builds the search embedder configured in cfg
// (catalog.search.embedder): nil, nil when no URL is set (the Index then uses
// the built-in static vectors); otherwise an HTTP embedder behind a
// CachedEmbedder whose cache is DataDir/catalog.db for tool vectors (see
// tieredCache). Configuration errors (bad key, unset key variable) name the
// key; an unreachable endpoint is not an error here. vectors is the
// service's persistent tool-vector cache for a model: DataDir/catalog.db or
// the catalog schema of env.Postgres (catalogpg).
func newEmbedder(cfg EmbedderConfig, vectors func(model string) search.VectorCache, log *slog.Logger) (*remoteEmbedder, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	const p = "catalog.search.embedder"
	transport := http.DefaultTransport.(*http.Transport).Clone()
	inner, err := search.NewHTTPEmbedder(search.HTTPEmbedderConfig{URL: cfg.URL, Model: cfg.Model,
		APIKeyEnv: cfg.APIKeyEnv, Dimensions: cfg.Dimensions, BatchSize: cfg.BatchSize, Timeout: cfg.Timeout,
		Client: &http.Client{Timeout: cfg.Timeout, Transport: transport}})
	if err != nil {
		return nil, fmt.Errorf("%s.%w", p, err)
	}
	// The cache model id includes the requested dimensions: the same model
	// asked for another length gives other vectors.
	model := cfg.Model
	if cfg.Dimensions > 0 {
		model = fmt.Sprintf("%s@%d", cfg.Model, cfg.Dimensions)
	}
	r := &remoteEmbedder{transport: transport}
	queries, err := lru.New[string, []float32](queryVectorCacheSize)
	if err != nil {
		return nil, err
	}
	r.embedder = search.NewCachedEmbedder(inner, model, &tieredCache{docs: vectors(model), queries: queries, log: log})
	return r, nil
}

// docsCtxKey marks a context as embedding catalog documents (tools).
type docsCtxKey struct{}

// withDocs returns ctx marked as embedding catalog documents.
func withDocs(ctx context.Context) context.Context { return context.WithValue(ctx, docsCtxKey{}, true) }

func isDocs(ctx context.Context) bool { v, _ := ctx.Value(docsCtxKey{}).(bool); return v }

// tieredCache is the catalog's search.VectorCache. Tool vectors (writes
// under a withDocs context, i.e. index updates) go to the sqlite store and
// survive restarts; query vectors go to a bounded in-memory LRU only, so
// callers' query texts are never persisted and cannot grow the store. Reads
// consult the LRU, then the store.
// Store failures are logged and treated as misses (the embedder is the
// source of truth).
type tieredCache struct {
	docs    search.VectorCache
	queries *lru.Cache[string, []float32]
	log     *slog.Logger
}

// GetVectors implements search.VectorCache.
func (c *tieredCache) GetVectors(ctx context.Context, keys []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(keys))
	var rest []string
	for _, k := range keys {
		if v, ok := c.queries.Get(k); ok {
			out[k] = v
		} else {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	got, err := c.docs.GetVectors(ctx, rest)
	if err != nil {
		c.log.Warn("catalog: reading cached tool vectors failed; re-embedding them", "err", err)
	}
	for k, v := range got {
		out[k] = v
	}
	return out, nil
}

// PutVectors implements search.VectorCache.
func (c *tieredCache) PutVectors(ctx context.Context, vecs map[string][]float32) error {
	if isDocs(ctx) {
		err := c.docs.PutVectors(ctx, vecs)
		if err != nil {
			c.log.Warn("catalog: caching tool vectors failed", "vectors", len(vecs), "err", err)
		}
		return err
	}
	for k, v := range vecs {
		c.queries.Add(k, v)
	}
	return nil
}
