package runtime

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/toolplane/toolplane/internal/egress"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// WebConfig is `runtime.web`, the web group's tools (docs/deerflow.md §1.6):
// web_fetch and web_search are config tools (`use: web.fetch`,
// `use: web.search` in runtime.tools, group `web`), off unless listed there.
type WebConfig struct {
	// Fetch configures web_fetch.
	Fetch WebFetchConfig `yaml:"fetch"`
	// Search configures web_search; a `use: web.search` tool requires
	// search.backend and search.url.
	Search WebSearchConfig `yaml:"search"`
}

// WebFetchConfig is `runtime.web.fetch`: the egress policy of web_fetch
// (internal/egress, docs/decisions/0134-egress-policy.md).
type WebFetchConfig struct {
	// Allow lists CIDR prefixes or addresses reachable although they are
	// loopback, private, link-local or metadata (default none).
	Allow []string `yaml:"allow"`
	// MaxResponseBytes bounds the body read (default 2 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Timeout bounds one fetch, redirects and body included (default 20s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxRedirects bounds the redirects followed, each re-checked (0 = the default 5).
	MaxRedirects int `yaml:"max_redirects"`
	// MaxChars bounds the text returned (default 50000).
	MaxChars int `yaml:"max_chars"`
}

// WebSearchConfig is `runtime.web.search`.
type WebSearchConfig struct {
	// Backend is "searxng" (GET <url>/search?format=json) or "openai" (an
	// OpenAI-compatible chat endpoint of a search model, POST
	// <url>/chat/completions).
	Backend string `yaml:"backend"`
	// URL is the backend's root URL.
	URL string `yaml:"url"`
	// APIKeyEnv names the environment variable holding the backend's key
	// (sent as a bearer token); empty sends none.
	APIKeyEnv string `yaml:"api_key_env"`
	// Model is the search model (backend openai; required there).
	Model string `yaml:"model"`
	// MaxResults bounds the results listed (default 5, at most 20).
	MaxResults int `yaml:"max_results"`
	// Allow lists prefixes the backend may be reached at although they are
	// local or private (e.g. 127.0.0.1 for a SearXNG beside the runtime).
	Allow []string `yaml:"allow"`
	// Timeout bounds one search (default 20s).
	Timeout time.Duration `yaml:"timeout"`
}

func (c *Config) usesWeb(use string) bool {
	return slices.ContainsFunc(c.Tools, func(t ToolConfig) bool { return t.Use == use })
}

func (c *Config) validateWeb() error {
	f, s := c.Web.Fetch, c.Web.Search
	if _, err := egress.ParsePrefixes("runtime.web.fetch.allow", f.Allow); err != nil {
		return err
	}
	if _, err := egress.ParsePrefixes("runtime.web.search.allow", s.Allow); err != nil {
		return err
	}
	switch {
	case f.MaxResponseBytes < 0 || (f.MaxResponseBytes > 0 && f.MaxResponseBytes < 1024):
		return fmt.Errorf("runtime.web.fetch.max_response_bytes: must be >= 1024, got %d", f.MaxResponseBytes)
	case f.Timeout < 0 || s.Timeout < 0:
		return fmt.Errorf("runtime.web.fetch.timeout, runtime.web.search.timeout: must not be negative")
	case f.MaxRedirects < 0 || f.MaxRedirects > 20:
		return fmt.Errorf("runtime.web.fetch.max_redirects: %d is outside 0..20", f.MaxRedirects)
	case f.MaxChars < 0:
		return fmt.Errorf("runtime.web.fetch.max_chars: must not be negative")
	case s.MaxResults < 0 || s.MaxResults > 20:
		return fmt.Errorf("runtime.web.search.max_results: %d is outside 0..20", s.MaxResults)
	}
	if s.Backend == "" && s.URL == "" {
		if c.usesWeb("web.search") {
			return fmt.Errorf("runtime.web.search.backend: a runtime.tools entry uses web.search, so runtime.web.search needs backend and url")
		}
		return nil
	}
	switch s.Backend {
	case runtimetools.SearchSearXNG:
	case runtimetools.SearchOpenAI:
		if s.Model == "" {
			return fmt.Errorf("runtime.web.search.model: required with backend openai")
		}
	default:
		return fmt.Errorf("runtime.web.search.backend: %q is not searxng or openai", s.Backend)
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("runtime.web.search.url: %q is not an http(s) URL without credentials", s.URL)
	}
	return nil
}

// webSettings is the web tools' configuration for the dispatcher (nil when
// no runtime.tools entry uses a web implementation). The search key is
// read from the environment here, once.
func (c *Config) webSettings() *runtimetools.WebSettings {
	if !c.usesWeb("web.fetch") && !c.usesWeb("web.search") {
		return nil
	}
	f, s := c.Web.Fetch, c.Web.Search
	allow, _ := egress.ParsePrefixes("runtime.web.fetch.allow", f.Allow)
	w := &runtimetools.WebSettings{
		Fetch: &egress.Policy{Allow: allow, MaxResponseBytes: or64(f.MaxResponseBytes, 2<<20), Timeout: orDur(f.Timeout, 20*time.Second),
			MaxRedirects: f.MaxRedirects, DialTimeout: 5 * time.Second},
		FetchMaxChars: f.MaxChars,
	}
	if s.Backend != "" {
		sallow, _ := egress.ParsePrefixes("runtime.web.search.allow", s.Allow)
		key := ""
		if s.APIKeyEnv != "" {
			key = os.Getenv(s.APIKeyEnv)
		}
		w.Search = &runtimetools.SearchBackend{Kind: s.Backend, URL: s.URL, APIKey: key, Model: s.Model, MaxResults: s.MaxResults,
			Policy: &egress.Policy{Allow: sallow, MaxResponseBytes: 4 << 20, Timeout: orDur(s.Timeout, 20*time.Second), DialTimeout: 5 * time.Second}}
	}
	return w
}

func or64(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

func orDur(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}
