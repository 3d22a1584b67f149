package runtimemcp

// Resource URI normalisation before the resource policy and before the
// catalog (docs/decisions/0161-front-door-resources-and-prompts.md): a
// pattern such as `toolplane+mcp://fs/file:///home/alice/*` must never
// allow `.../home/alice/../bob/secret` or `.../alice/%2e%2e/bob/...`, so
// the URI the policy sees is the URI the server reads.

import (
	"fmt"
	"net/url"
	"strings"
)

const exposedURIPrefix = "toolplane+mcp://"

// normaliseURI returns the RFC 3986 §6.2.2 normal form of a resource URI
// that matters to the policy: percent-encoded unreserved characters are
// decoded (§2.3) and dot segments are removed from the path of a
// hierarchical URI (§5.2.4). A front-door URI
// (`toolplane+mcp://<server>/<original URI>`) has its original URI
// normalised the same way. A path segment that would still be a dot
// segment once an encoded `/` or `\` is decoded (`..%2F`) is refused.
func normaliseURI(uri string) (string, error) { return normaliseDepth(uri, 0) }

func normaliseDepth(uri string, depth int) (string, error) {
	if depth > 4 {
		return "", fmt.Errorf("uri %q: too deeply nested", uri)
	}
	uri = decodeUnreserved(uri)
	if rest, ok := strings.CutPrefix(uri, exposedURIPrefix); ok {
		if enc, orig, found := strings.Cut(rest, "/"); found && enc != "" && orig != "" {
			n, err := normaliseDepth(orig, depth+1)
			if err != nil {
				return "", err
			}
			return exposedURIPrefix + enc + "/" + n, nil
		}
	}
	scheme, rest, ok := cutScheme(uri)
	if !ok {
		return uri, nil // not an absolute URI: left to the catalog (not found)
	}
	// hier-part: "//" authority path-abempty, or path-absolute / rootless.
	prefix := scheme + ":"
	if strings.HasPrefix(rest, "//") {
		end := strings.IndexAny(rest[2:], "/?#")
		if end < 0 {
			return uri, nil
		}
		prefix += rest[:2+end]
		rest = rest[2+end:]
	}
	path, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		path, tail = rest[:i], rest[i:]
	}
	if !strings.HasPrefix(path, "/") {
		return uri, nil // opaque (mailto:, urn:): no hierarchy to escape
	}
	path = removeDotSegments(path)
	for _, seg := range strings.Split(path, "/") {
		l := strings.ToLower(seg)
		if !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c") {
			continue
		}
		for _, p := range strings.FieldsFunc(strings.NewReplacer("%2f", "/", "%5c", "/").Replace(l), func(r rune) bool { return r == '/' }) {
			if p == "." || p == ".." {
				return "", fmt.Errorf("uri %q: an encoded path separator next to a dot segment is refused", uri)
			}
		}
	}
	return prefix + path + tail, nil
}

// cutScheme splits an absolute URI at its scheme (RFC 3986 §3.1).
func cutScheme(uri string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(uri, ':')
	if i <= 0 {
		return "", "", false
	}
	for k, c := range uri[:i] {
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (k == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", false
		}
	}
	return uri[:i], uri[i+1:], true
}

// decodeUnreserved decodes every %XX that encodes an unreserved character
// (ALPHA / DIGIT / "-" / "." / "_" / "~"); other escapes are kept.
func decodeUnreserved(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := url.PathUnescape(s[i : i+3]); err == nil && len(v) == 1 && unreserved(v[0]) {
				b.WriteByte(v[0])
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// removeDotSegments is RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	var out []string // output buffer as segments, each with its leading "/"
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	return strings.Join(out, "")
}
