package runtimetools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/toolplane/toolplane/internal/egress"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// The web group (docs/deerflow.md §1.6): web_fetch reads one URL through
// the egress policy (internal/egress: loopback, private, link-local and
// metadata destinations refused unless allowed, re-checked after DNS and on
// every redirect, bounded in bytes and time) and returns it as text;
// web_search asks a configured backend (SearXNG's JSON API or an
// OpenAI-compatible chat endpoint of a search model). Both are config tools
// (`use: web.fetch`, `use: web.search`) and exist only when listed in
// runtime.tools and configured under runtime.web.

// Search backend kinds of runtime.web.search.backend.
const (
	SearchSearXNG = "searxng"
	SearchOpenAI  = "openai"
)

// WebSettings configure the web tools (nil: the tools fail with a BUSINESS
// error naming runtime.web).
type WebSettings struct {
	// Fetch is the egress policy of web_fetch.
	Fetch *egress.Policy
	// FetchMaxChars bounds the text web_fetch returns (0 = 50,000).
	FetchMaxChars int
	// Search is the search backend (nil: web_search is not configured).
	Search *SearchBackend
}

// SearchBackend is one configured search backend.
type SearchBackend struct {
	// Kind is SearchSearXNG or SearchOpenAI.
	Kind string
	// URL is the backend's root (SearXNG: the instance, GET <url>/search;
	// OpenAI: the API root, POST <url>/chat/completions).
	URL string
	// APIKey is sent as a bearer token when not empty (never logged).
	APIKey string
	// Model is the OpenAI-compatible search model.
	Model string
	// MaxResults bounds the results listed (0 = 5).
	MaxResults int
	// Policy is the egress policy the backend is reached through (the
	// operator allows a local backend's address explicitly).
	Policy *egress.Policy
}

// fetchTypes are the content types web_fetch reads as text; anything else
// (images, archives, executables, PDFs) is refused.
var fetchTypes = map[string]string{
	"text/html": "html", "application/xhtml+xml": "html",
	"text/plain": "text", "text/markdown": "text", "text/csv": "text", "text/xml": "text",
	"application/xml": "text", "application/json": "text", "application/ld+json": "text",
	"application/rss+xml": "text", "application/atom+xml": "text",
}

// webFetch implements web_fetch {url}.
func (s *Dispatcher) webFetch(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	w := s.cfg.Web
	if w == nil || w.Fetch == nil {
		return nil, runtimechain.Business("web_fetch is not configured (runtime.web.fetch)")
	}
	raw := strings.TrimSpace(strArg(args, "url"))
	if raw == "" {
		return nil, runtimechain.Business("url is required (an http or https URL)")
	}
	if len(raw) > 8192 {
		return nil, runtimechain.Business("url is longer than 8192 bytes")
	}
	if err := w.Fetch.CheckURL(ctx, raw); err != nil {
		return nil, runtimechain.Business("url %s refused: %v", redactURL(raw), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, runtimechain.Business("url: %v", err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1")
	req.Header.Set("User-Agent", "Toolplane-web_fetch/1")
	client := w.Fetch.Client()
	defer client.CloseIdleConnections() // one client per call: keep no connection behind
	resp, err := client.Do(req)
	if err != nil {
		return nil, fetchErr(raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, runtimechain.Business("%s answered HTTP %d", redactURL(raw), resp.StatusCode)
	}
	ct, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	kind, ok := fetchTypes[ct]
	if !ok {
		if ct == "" {
			ct = "none"
		}
		return nil, runtimechain.Business("%s has content type %s; web_fetch reads only text (HTML, plain text, Markdown, JSON, XML, CSV)", redactURL(raw), ct)
	}
	if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "utf8" && cs != "us-ascii" && cs != "iso-8859-1" && cs != "latin1" {
		return nil, runtimechain.Business("%s is encoded in %s; web_fetch reads UTF-8 and Latin-1 only", redactURL(raw), cs)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fetchErr(raw, err)
	}
	if cs := strings.ToLower(params["charset"]); cs == "iso-8859-1" || cs == "latin1" {
		body = latin1ToUTF8(body)
	}
	final := resp.Request.URL
	var title, text string
	if kind == "html" {
		title, text = HTMLText(body, final)
	} else {
		text = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	max := w.FetchMaxChars
	if max <= 0 {
		max = 50_000
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "URL: %s\n", redactURL(final.String()))
	if title != "" {
		fmt.Fprintf(&sb, "Title: %s\n", title)
	}
	sb.WriteString("\n")
	if n := utf8.RuneCountInString(text); n > max {
		text = truncRunes(text, max) + fmt.Sprintf("\n\n[truncated: %d of %d characters shown]", max, n)
	}
	sb.WriteString(text)
	return &runtimechain.Outcome{Text: sb.String()}, nil
}

func truncRunes(s string, n int) string {
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

func latin1ToUTF8(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	for _, c := range b {
		out.WriteRune(rune(c))
	}
	return out.Bytes()
}

// fetchErr is a fetch failure the model can act on (a refusal, a
// timeout, a body over the limit) as a BUSINESS error; the URL is shown
// without its query (which may carry tokens).
func fetchErr(raw string, err error) error {
	switch {
	case errors.Is(err, egress.ErrDenied):
		return runtimechain.Business("url %s refused: %v", redactURL(raw), unwrapURLErr(err))
	case errors.Is(err, egress.ErrTooLarge):
		return runtimechain.Business("%s: the response is larger than the limit (runtime.web.fetch.max_response_bytes)", redactURL(raw))
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return runtimechain.Business("%s did not answer in time (runtime.web.fetch.timeout)", redactURL(raw))
	}
	return runtimechain.Business("%s could not be fetched: %v", redactURL(raw), unwrapURLErr(err))
}

func unwrapURLErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL drops user info, query and fragment from a URL shown in a
// result or an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.Fragment = nil, ""
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}

// skipped are elements whose content is not page text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Iframe: true, atom.Object: true, atom.Canvas: true, atom.Head: true, atom.Math: true,
}

// blocks are elements that start a new line of text.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true, atom.Header: true,
	atom.Footer: true, atom.Nav: true, atom.Aside: true, atom.Ul: true, atom.Ol: true, atom.Table: true,
	atom.Tr: true, atom.Blockquote: true, atom.Pre: true, atom.Form: true, atom.Figure: true, atom.Dl: true,
	atom.Dt: true, atom.Dd: true, atom.Hr: true, atom.Br: true, atom.Address: true, atom.Details: true, atom.Summary: true,
}

var headings = map[atom.Atom]string{atom.H1: "# ", atom.H2: "## ", atom.H3: "### ", atom.H4: "#### ", atom.H5: "##### ", atom.H6: "###### "}

// HTMLText renders an HTML document as readable text with the HTML5
// parser of golang.org/x/net/html: scripts, styles and other non-text
// elements are dropped, headings become Markdown headings, list items
// "- " lines, table cells are separated by " | ", links are kept as
// "text (absolute URL)", whitespace is collapsed outside <pre>. It returns
// the document's <title> too.
func HTMLText(b []byte, base *url.URL) (title, text string) {
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		return "", strings.ToValidUTF8(string(b), "\uFFFD")
	}
	r := &htmlRenderer{base: base}
	r.walk(doc, false)
	out := strings.TrimSpace(collapseBlankLines(r.sb.String()))
	return strings.Join(strings.Fields(r.title), " "), strings.ToValidUTF8(out, "\uFFFD")
}

type htmlRenderer struct {
	sb    strings.Builder
	base  *url.URL
	title string
	space bool // a space is pending before the next word
}

func (r *htmlRenderer) newline() {
	r.sb.WriteString("\n")
	r.space = false
}

func (r *htmlRenderer) word(s string, pre bool) {
	if pre {
		r.sb.WriteString(s)
		return
	}
	lead := len(s) > 0 && isSpace(s[0])
	trail := len(s) > 0 && isSpace(s[len(s)-1])
	f := strings.Fields(s)
	if len(f) == 0 {
		if lead {
			r.space = true
		}
		return
	}
	cur := r.sb.String()
	if (r.space || lead) && len(cur) > 0 && cur[len(cur)-1] != '\n' && cur[len(cur)-1] != ' ' {
		r.sb.WriteString(" ")
	}
	r.sb.WriteString(strings.Join(f, " "))
	r.space = trail
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' }

func (r *htmlRenderer) walk(n *html.Node, pre bool) {
	switch n.Type {
	case html.TextNode:
		r.word(n.Data, pre)
		return
	case html.ElementNode:
		if n.DataAtom == atom.Head {
			r.findTitle(n)
		}
		if skipped[n.DataAtom] {
			return
		}
		switch {
		case headings[n.DataAtom] != "":
			r.newline()
			r.newline()
			r.sb.WriteString(headings[n.DataAtom])
		case n.DataAtom == atom.Li:
			r.newline()
			r.sb.WriteString("- ")
		case n.DataAtom == atom.Td || n.DataAtom == atom.Th:
			if n.PrevSibling != nil {
				r.sb.WriteString(" | ")
			}
		case n.DataAtom == atom.Img:
			if alt := attr(n, "alt"); strings.TrimSpace(alt) != "" {
				r.word("[image: "+alt+"]", false)
			}
		case blocks[n.DataAtom]:
			r.newline()
		}
		if n.DataAtom == atom.Pre {
			pre = true
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		r.walk(c, pre)
	}
	if n.Type != html.ElementNode {
		return
	}
	switch {
	case n.DataAtom == atom.A:
		if href := r.link(attr(n, "href")); href != "" && n.FirstChild != nil {
			r.sb.WriteString(" (" + href + ")")
		}
	case headings[n.DataAtom] != "" || n.DataAtom == atom.P || n.DataAtom == atom.Pre:
		r.newline()
		r.newline()
	case blocks[n.DataAtom]:
		r.newline()
	}
}

func (r *htmlRenderer) findTitle(n *html.Node) {
	for c := n.FirstChild; c != nil && r.title == ""; c = c.NextSibling {
		if c.Type == html.ElementNode && c.DataAtom == atom.Title && c.FirstChild != nil {
			r.title = c.FirstChild.Data
		}
	}
}

// link resolves href against the page; only http(s) links are shown.
func (r *htmlRenderer) link(href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if r.base != nil {
		u = r.base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// collapseBlankLines trims trailing spaces and keeps at most one blank line.
func collapseBlankLines(s string) string {
	var out []string
	blank := 0
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t")
		if strings.TrimSpace(l) == "" {
			blank++
			if blank > 1 {
				continue
			}
			l = ""
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// webSearch implements web_search {query, max_results?}.
func (s *Dispatcher) webSearch(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	w := s.cfg.Web
	if w == nil || w.Search == nil {
		return nil, runtimechain.Business("web_search is not configured (runtime.web.search)")
	}
	b := w.Search
	q := strings.TrimSpace(strArg(args, "query"))
	if q == "" {
		return nil, runtimechain.Business("query must not be empty")
	}
	if len(q) > 2048 {
		return nil, runtimechain.Business("query is longer than 2048 bytes")
	}
	max := b.MaxResults
	if max <= 0 {
		max = 5
	}
	if n, ok := args["max_results"].(float64); ok && n >= 1 && int(n) < max {
		max = int(n)
	}
	var (
		text string
		err  error
	)
	switch b.Kind {
	case SearchSearXNG:
		text, err = searchSearXNG(ctx, b, q, max)
	case SearchOpenAI:
		text, err = searchOpenAI(ctx, b, q, max)
	default:
		return nil, fmt.Errorf("runtime.web.search.backend: unknown kind %q", b.Kind)
	}
	if err != nil {
		return nil, err
	}
	return &runtimechain.Outcome{Text: text}, nil
}

// searchErr maps a backend failure: it is the operator's backend, so a
// failure is a RUNTIME upstream failure (the model cannot fix it), except
// a timeout, which the model may retry.
func searchErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") {
		return runtimechain.Business("the search backend did not answer in time; try again")
	}
	return runtimechain.UpstreamFailure("web_search backend", unwrapURLErr(err))
}

func (b *SearchBackend) do(req *http.Request) ([]byte, error) {
	if b.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.APIKey)
	}
	req.Header.Set("Accept", "application/json")
	client := b.Policy.Client()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, searchErr(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, searchErr(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, runtimechain.UpstreamFailure("web_search backend", fmt.Errorf("HTTP %d", resp.StatusCode))
	}
	return body, nil
}

// searchSearXNG queries SearXNG's JSON API (GET /search?q=…&format=json).
func searchSearXNG(ctx context.Context, b *SearchBackend, q string, max int) (string, error) {
	u := strings.TrimRight(b.URL, "/") + "/search?" + url.Values{"q": {q}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	body, err := b.do(req)
	if err != nil {
		return "", err
	}
	var r struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", runtimechain.UpstreamFailure("web_search backend", fmt.Errorf("not a SearXNG JSON answer: %v", err))
	}
	var sb strings.Builder
	n := 0
	for _, it := range r.Results {
		if n == max {
			break
		}
		if it.URL == "" {
			continue
		}
		n++
		fmt.Fprintf(&sb, "%d. %s\n   %s\n", n, oneLineText(it.Title, 300), oneLineText(it.URL, 2048))
		if c := oneLineText(it.Content, 600); c != "" {
			fmt.Fprintf(&sb, "   %s\n", c)
		}
	}
	if n == 0 {
		return "No results for: " + q, nil
	}
	return strings.TrimRight(sb.String(), "\n"), nil
}

// searchOpenAI asks an OpenAI-compatible chat endpoint of a search model
// (POST /chat/completions); the answer is followed by the sources the
// provider returns (`citations` or `search_results`, as Perplexity's
// Sonar API does), at most max of them.
func searchOpenAI(ctx context.Context, b *SearchBackend, q string, max int) (string, error) {
	payload, _ := json.Marshal(map[string]any{"model": b.Model, "messages": []map[string]string{
		{"role": "system", "content": "Search the web and answer concisely, citing your sources."},
		{"role": "user", "content": q}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(b.URL, "/")+"/chat/completions", bytes.NewReader(payload))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	body, err := b.do(req)
	if err != nil {
		return "", err
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Citations     []string `json:"citations"`
		SearchResults []struct {
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"search_results"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) == 0 {
		return "", runtimechain.UpstreamFailure("web_search backend", fmt.Errorf("not a chat completion with a choice"))
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimSpace(r.Choices[0].Message.Content))
	var src []string
	for _, s := range r.SearchResults {
		if s.URL != "" {
			src = append(src, oneLineText(s.Title, 300)+" — "+oneLineText(s.URL, 2048))
		}
	}
	if len(src) == 0 {
		for _, c := range r.Citations {
			src = append(src, oneLineText(c, 2048))
		}
	}
	if len(src) > max {
		src = src[:max]
	}
	if len(src) > 0 {
		sb.WriteString("\n\nSources:")
		for i, s := range src {
			fmt.Fprintf(&sb, "\n%d. %s", i+1, s)
		}
	}
	return sb.String(), nil
}

// oneLineText is s on one line, at most n runes.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = truncRunes(s, n) + "…"
	}
	return s
}
