package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// HTTPEmbedderConfig configures an OpenAI-compatible embeddings client.
type HTTPEmbedderConfig struct {
	// URL is the full endpoint, e.g. "https://host/v1/embeddings". Required;
	// http or https.
	URL string
	// Model is sent as "model". Required.
	Model string
	// APIKeyEnv names the environment variable holding the bearer token; ""
	// sends no Authorization header. The key is read once, at construction.
	APIKeyEnv string
	// Dimensions, when > 0, is sent as "dimensions" and every returned
	// vector must have exactly this length.
	Dimensions int
	// BatchSize caps texts per request (default 64).
	BatchSize int
	// Timeout bounds one HTTP request (default 30 s).
	Timeout time.Duration
	// Client overrides the HTTP client (tests); nil uses a client with Timeout.
	Client *http.Client
}

// HTTPEmbedder calls an OpenAI-compatible POST /v1/embeddings endpoint:
// request {"model", "input": [texts], "dimensions"?}, response
// {"data": [{"index", "embedding": [floats]}]}.
type HTTPEmbedder struct {
	cfg    HTTPEmbedderConfig
	key    string
	client *http.Client
}

// maxEmbeddingResponse bounds the response body (64 MiB).
const maxEmbeddingResponse = 64 << 20

// NewHTTPEmbedder validates cfg and returns the client. Errors name the
// configuration field.
func NewHTTPEmbedder(cfg HTTPEmbedderConfig) (*HTTPEmbedder, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url: must be an absolute http(s) URL, got %q", cfg.URL)
	}
	if cfg.Model == "" {
		return nil, errors.New("model: must not be empty")
	}
	if cfg.Dimensions < 0 {
		return nil, errors.New("dimensions: must be >= 0")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	e := &HTTPEmbedder{cfg: cfg, client: cfg.Client}
	if e.client == nil {
		e.client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.APIKeyEnv != "" {
		e.key = os.Getenv(cfg.APIKeyEnv)
		if e.key == "" {
			return nil, fmt.Errorf("api_key_env: environment variable %s is empty or unset", cfg.APIKeyEnv)
		}
	}
	return e, nil
}

// Model returns the configured model name (use it as the cache model id).
func (e *HTTPEmbedder) Model() string { return e.cfg.Model }

// Embed implements Embedder, sending at most BatchSize texts per request.
func (e *HTTPEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		end := min(start+e.cfg.BatchSize, len(texts))
		vecs, err := e.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *HTTPEmbedder) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	body := map[string]any{"model": e.cfg.Model, "input": texts}
	if e.cfg.Dimensions > 0 {
		body["dimensions"] = e.cfg.Dimensions
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embeddings request: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxEmbeddingResponse+1))
	if err != nil {
		return nil, fmt.Errorf("embeddings response: %w", err)
	}
	if len(data) > maxEmbeddingResponse {
		return nil, fmt.Errorf("embeddings response: larger than %d bytes", maxEmbeddingResponse)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := data
		if len(snippet) > 200 {
			snippet = snippet[:200]
		}
		return nil, fmt.Errorf("embeddings response: HTTP %d: %s", resp.StatusCode, snippet)
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &parsed); err != nil {
		return nil, fmt.Errorf("embeddings response: %w", err)
	}
	if len(parsed.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings response: %d vectors for %d inputs", len(parsed.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	dim := e.cfg.Dimensions
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings response: bad or duplicate index %d", d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embeddings response: empty embedding at index %d", d.Index)
		}
		if dim == 0 {
			dim = len(d.Embedding)
		}
		if len(d.Embedding) != dim {
			return nil, fmt.Errorf("embeddings response: index %d has %d dimensions, want %d", d.Index, len(d.Embedding), dim)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}
