package runtime

import (
	"strings"
	"testing"
)

func TestWebConfigOffUnlessConfigured(t *testing.T) {
	search := []ToolConfig{{Name: "web_search", Group: "web", Use: "web.search"}}
	cases := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Tools = search }, "runtime.web.search.backend: a runtime.tools entry uses web.search"},
		{func(c *Config) { c.Web.Search = WebSearchConfig{Backend: "bing", URL: "https://x"} }, "runtime.web.search.backend: \"bing\""},
		{func(c *Config) { c.Web.Search = WebSearchConfig{Backend: "openai", URL: "https://x"} }, "runtime.web.search.model"},
		{func(c *Config) { c.Web.Search = WebSearchConfig{Backend: "searxng", URL: "https://u:p@x"} }, "runtime.web.search.url"},
		{func(c *Config) { c.Web.Fetch.Allow = []string{"10.0.0.0/33"} }, "runtime.web.fetch.allow[0]"},
		{func(c *Config) { c.Web.Fetch.MaxResponseBytes = 10 }, "runtime.web.fetch.max_response_bytes"},
		{func(c *Config) { c.Web.Search.MaxResults = 21 }, "runtime.web.search.max_results"},
	}
	for _, tc := range cases {
		var c Config
		tc.mutate(&c)
		c.SetDefaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
		}
	}
	// The defaults bind no web tool; listing them turns them on.
	var c Config
	c.SetDefaults()
	if c.webSettings() != nil {
		t.Fatal("web tools configured by default")
	}
	c = Config{Tools: append(search, ToolConfig{Name: "web_fetch", Group: "web", Use: "web.fetch"}),
		Web: WebConfig{Fetch: WebFetchConfig{Allow: []string{"127.0.0.1"}}, Search: WebSearchConfig{Backend: "searxng", URL: "http://127.0.0.1:8888", Allow: []string{"127.0.0.1"}}}}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	w := c.webSettings()
	if w == nil || w.Search == nil || w.Fetch.MaxResponseBytes != 2<<20 || len(w.Fetch.Allow) != 1 || len(w.Search.Policy.Allow) != 1 {
		t.Fatalf("webSettings = %+v", w)
	}
}
