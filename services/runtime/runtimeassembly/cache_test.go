package runtimeassembly

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// baseOf is a Base of n deferred tools with descriptions of desc bytes.
func baseOf(n, desc int) *Base {
	b := &Base{ByName: map[string]*Tool{}, Deferred: map[string]*Tool{}}
	for i := 0; i < n; i++ {
		t := &Tool{Name: fmt.Sprintf("tool_%d", i), Description: strings.Repeat("d", desc), Source: SourceMCP}
		b.Tools = append(b.Tools, t)
		b.ByName[t.Name], b.Deferred[t.Name] = t, t
		b.DeferredNames = append(b.DeferredNames, t.Name)
	}
	return b
}

func TestAssemblyCacheBoundedByBytes(t *testing.T) {
	now := time.Now()
	one := baseOf(1000, 1000) // ~0.3 MB estimated (descriptions are shared with the listing)
	size := one.estimatedBytes()
	if size < 200_000 || size > 500_000 {
		t.Fatalf("estimate %d bytes for 1,000 tools", size)
	}
	c := newAssemblyCache(100, 3*size+size/2) // room for 3 entries by bytes, 100 by count
	for i := 0; i < 5; i++ {
		c.put(fmt.Sprintf("k%d", i), baseOf(1000, 1000), 1, 1, now)
	}
	entries, bytes := c.usage()
	if entries != 3 || bytes > 3*size+size/2 {
		t.Fatalf("entries %d, bytes %d; want 3 within %d", entries, bytes, 3*size+size/2)
	}
	if c.get("k0", now) != nil || c.get("k1", now) != nil || c.get("k4", now) == nil {
		t.Fatal("the least recently used entries must go first")
	}
	// Using k2 makes k3 the oldest: the next put evicts k3, not k2.
	c.get("k2", now)
	c.put("k5", baseOf(1000, 1000), 1, 1, now)
	if c.get("k2", now) == nil || c.get("k3", now) != nil {
		t.Fatal("get must refresh an entry's recency")
	}
	// An entry larger than the whole budget is never cached and evicts nothing.
	c.put("huge", baseOf(5000, 1000), 1, 1, now)
	if c.get("huge", now) != nil {
		t.Fatal("an entry larger than the budget was cached")
	}
	if n, _ := c.usage(); n != 3 {
		t.Fatalf("entries %d after an oversized put, want 3", n)
	}
	// The entry bound still applies, and replacing a key does not double-count.
	c = newAssemblyCache(2, 1<<30)
	for i := 0; i < 3; i++ {
		c.put("same", baseOf(10, 10), 1, 1, now)
	}
	c.put("a", baseOf(10, 10), 1, 1, now)
	c.put("b", baseOf(10, 10), 1, 1, now)
	if n, bytes := c.usage(); n != 2 || bytes != 2*baseOf(10, 10).estimatedBytes() {
		t.Fatalf("entries %d, bytes %d; want 2 and twice one entry", n, bytes)
	}
	// Expired entries are dropped on read.
	if c.get("b", now.Add(cacheTTL+time.Second)) != nil {
		t.Fatal("an expired entry was returned")
	}
	if n, _ := c.usage(); n != 1 {
		t.Fatalf("entries %d after an expired read, want 1", n)
	}
	// A new catalog generation or policy version drops every older entry.
	c.put("a", baseOf(10, 10), 1, 1, now)
	c.put("g2", baseOf(10, 10), 2, 1, now)
	if n, bytes := c.usage(); n != 1 || bytes != baseOf(10, 10).estimatedBytes() || c.get("a", now) != nil {
		t.Fatalf("after a generation change: entries %d, bytes %d", n, bytes)
	}
	c.put("p2", baseOf(10, 10), 2, 2, now)
	if c.get("g2", now) != nil || c.get("p2", now) == nil {
		t.Fatal("a policy change must drop the entries of the old version")
	}
	// CacheEntries 0 disables the cache.
	off := newAssemblyCache(0, 0)
	off.put("x", one, 1, 1, now)
	if off.get("x", now) != nil {
		t.Fatal("a disabled cache returned an entry")
	}
}
