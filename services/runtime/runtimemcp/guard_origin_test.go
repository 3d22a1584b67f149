package runtimemcp

import "testing"

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:7421", "127.0.0.1:7421", true},
		{"http://LOCALHOST:7421", "localhost:7421", true},
		{"http://localhost", "localhost:80", true},
		{"https://example.com", "example.com", true},
		{"http://[::1]:7421", "[::1]:7421", true},
		{"http://127.0.0.1:7422", "127.0.0.1:7421", false},
		{"http://evil.example", "127.0.0.1:7421", false},
		{"https://localhost:7421", "localhost:80", false},
		{"null", "127.0.0.1:7421", false},
		{"file://x", "x", false},
		{"http://127.0.0.1:7421", "", false},
	} {
		if got := sameOrigin(c.origin, c.host); got != c.want {
			t.Errorf("sameOrigin(%q, %q) = %v, want %v", c.origin, c.host, got, c.want)
		}
	}
}
