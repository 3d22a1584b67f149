package runtimemcp

// Resources inside results (embedded resources and resource links of a
// prompts/get result, the contents of a resources/read result) are checked
// against the resource policy like resources/read itself: a server (or a
// prompt) must not hand out a resource the caller may not read
// (docs/decisions/0161-front-door-resources-and-prompts.md).

import (
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// withheldText replaces a denied embedded resource.
const withheldText = "resource withheld by policy"

// maxEmbeddedChecks bounds the distinct URIs checked per result; the rest
// are withheld (fail closed).
const maxEmbeddedChecks = 64

// embeddedPolicy decides the URIs of one result, each once.
type embeddedPolicy struct {
	s       *Server
	fc      *featureCall
	server  string // the server that produced the result
	res     []*catalogv1.Resource
	tpls    []*catalogv1.ResourceTemplate
	listed  bool
	decided map[string]bool
}

func (s *Server) newEmbeddedPolicy(fc *featureCall, server string) *embeddedPolicy {
	return &embeddedPolicy{s: s, fc: fc, server: server, decided: map[string]bool{}}
}

// owner is the server of an exposed URI: a listed resource or template,
// else the namespaced form's server, else the result's own server (the
// catalog leaves a URI unprefixed only for that server).
func (e *embeddedPolicy) owner(uri string) string {
	if !e.listed {
		e.listed = true
		if r, err := e.s.opts.Catalog.ListResources(e.fc.ctx, &catalogv1.ListResourcesRequest{}); err == nil {
			e.res = r.GetResources()
		}
		if t, err := e.s.opts.Catalog.ListResourceTemplates(e.fc.ctx, &catalogv1.ListResourceTemplatesRequest{}); err == nil {
			e.tpls = t.GetResourceTemplates()
		}
	}
	for _, r := range e.res {
		if r.GetUri() == uri {
			return r.GetServer()
		}
	}
	for _, t := range e.tpls {
		if templateMatches(t.GetUriTemplate(), uri) {
			return t.GetServer()
		}
	}
	if rest, ok := strings.CutPrefix(uri, exposedURIPrefix); ok {
		if enc, _, found := strings.Cut(rest, "/"); found {
			if srv, err := url.PathUnescape(enc); err == nil && srv != "" {
				return srv
			}
		}
	}
	return e.server
}

// allowed normalises uri and reports whether the caller may read it, with
// the normalised form.
func (e *embeddedPolicy) allowed(uri string) (string, bool) {
	n, err := normaliseURI(uri)
	if err != nil || n == "" {
		return uri, false
	}
	if ok, seen := e.decided[n]; seen {
		return n, ok
	}
	if len(e.decided) >= maxEmbeddedChecks {
		return n, false
	}
	ok := e.s.authorize(e.fc, authzv1.ResourceType_RESOURCE_TYPE_RESOURCE, n, e.owner(n)) == nil
	e.decided[n] = ok
	return n, ok
}

// policeMessages replaces every denied embedded resource or resource link
// of a prompts/get result by a short text.
func (s *Server) policeMessages(fc *featureCall, server string, msgs []mcp.PromptMessage) {
	e := s.newEmbeddedPolicy(fc, server)
	for i := range msgs {
		msgs[i].Content = e.content(msgs[i].Content)
	}
}

func (e *embeddedPolicy) content(c mcp.Content) mcp.Content {
	switch v := c.(type) {
	case mcp.EmbeddedResource:
		if r, ok := e.resource(v.Resource); ok {
			v.Resource = r
			return v
		}
		return mcp.NewTextContent(withheldText)
	case *mcp.EmbeddedResource:
		if r, ok := e.resource(v.Resource); ok {
			v.Resource = r
			return v
		}
		return mcp.NewTextContent(withheldText)
	case mcp.ResourceLink:
		if n, ok := e.allowed(v.URI); ok {
			v.URI = n
			return v
		}
		return mcp.NewTextContent(withheldText)
	case *mcp.ResourceLink:
		if n, ok := e.allowed(v.URI); ok {
			v.URI = n
			return v
		}
		return mcp.NewTextContent(withheldText)
	}
	return c
}

// resource checks one resource contents, returning it with its URI normalised.
func (e *embeddedPolicy) resource(r mcp.ResourceContents) (mcp.ResourceContents, bool) {
	switch v := r.(type) {
	case mcp.TextResourceContents:
		n, ok := e.allowed(v.URI)
		v.URI = n
		return v, ok
	case *mcp.TextResourceContents:
		n, ok := e.allowed(v.URI)
		v.URI = n
		return v, ok
	case mcp.BlobResourceContents:
		n, ok := e.allowed(v.URI)
		v.URI = n
		return v, ok
	case *mcp.BlobResourceContents:
		n, ok := e.allowed(v.URI)
		v.URI = n
		return v, ok
	}
	return r, false // an unknown kind of contents: withheld
}

// policeContents removes the contents of a resources/read result the
// caller may not read (a server may answer with other URIs than the one
// requested, already authorized).
func (s *Server) policeContents(fc *featureCall, server, requested string, in []mcp.ResourceContents) []mcp.ResourceContents {
	e := s.newEmbeddedPolicy(fc, server)
	e.decided[requested] = true
	out := make([]mcp.ResourceContents, 0, len(in))
	for _, c := range in {
		if r, ok := e.resource(c); ok {
			out = append(out, r)
		}
	}
	return out
}
