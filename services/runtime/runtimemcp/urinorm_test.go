package runtimemcp

import "testing"

func TestNormaliseURI(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// RFC 3986 §5.2.4 and §5.4 examples (paths).
		{"http://a/b/c/./../../g", "http://a/g"},
		{"http://a/mid/content=5/../6", "http://a/mid/6"},
		{"http://a/b/c/d;p?q/../x", "http://a/b/c/d;p?q/../x"}, // the query is not a path
		{"http://a/b/c/g/.", "http://a/b/c/g/"},
		{"http://a/../../g", "http://a/g"},
		{"file:///home/alice/../bob/secret.txt", "file:///home/bob/secret.txt"},
		{"file:///home/alice/%2e%2e/bob/x", "file:///home/bob/x"},
		{"file:///home/alice/%2E%2e/bob/x", "file:///home/bob/x"},
		{"file:///home/%61lice/%7Ex", "file:///home/alice/~x"},
		{"file:///home/alice/a%20b", "file:///home/alice/a%20b"}, // reserved/other escapes kept
		{"file:/home/alice/../bob", "file:/home/bob"},
		{"toolplane+mcp://fs/file:///home/alice/../bob/secret.txt", "toolplane+mcp://fs/file:///home/bob/secret.txt"},
		{"toolplane+mcp://fs/file:///../../etc/passwd", "toolplane+mcp://fs/file:///etc/passwd"},
		{"toolplane+mcp://fs/file:///home/alice/%2e%2e/bob", "toolplane+mcp://fs/file:///home/bob"},
		{"toolplane+mcp://fs%2Fx/file:///a/./b", "toolplane+mcp://fs%2Fx/file:///a/b"},
		{"urn:example:a/../b", "urn:example:a/../b"}, // opaque: no hierarchy
		{"demo://resource/static/document/1", "demo://resource/static/document/1"},
	} {
		got, err := normaliseURI(c.in)
		if err != nil || got != c.want {
			t.Errorf("normaliseURI(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"file:///home/alice/..%2Fbob/x",
		"file:///home/alice/..%5cbob",
		"toolplane+mcp://fs/file:///home/alice/%2E%2E%2Fbob",
	} {
		if got, err := normaliseURI(in); err == nil {
			t.Errorf("normaliseURI(%q) = %q: want refused", in, got)
		}
	}
}
