package auth

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// jwtCacheEntries bounds the verified-JWT cache (a few hundred bytes each).
const jwtCacheEntries = 4096

// jwtCache remembers the identity of JWTs that passed verification, keyed by
// the SHA-256 of the exact token text, until the token's own expiry (exp
// plus the configured leeway). This is "authentication verified once per
// credential" of docs/performance.md: a signature and its claims do not
// change, so a repeat of the same bytes would verify the same way until
// exp; nbf and iat only ever stop failing with time. Failures are never
// cached. The verification key is fixed for the life of the Authenticator
// (a configuration change builds a new one), so no entry outlives its key.
type jwtCache struct {
	c *lru.Cache[[32]byte, jwtEntry]
}

type jwtEntry struct {
	id    Identity
	until time.Time
}

func newJWTCache(n int) *jwtCache {
	c, err := lru.New[[32]byte, jwtEntry](n)
	if err != nil { // only for n <= 0
		panic(err)
	}
	return &jwtCache{c: c}
}

// get returns a copy of the cached identity of the token hashing to sum,
// if it is cached and still valid at now.
func (c *jwtCache) get(sum [32]byte, now time.Time) (Identity, bool) {
	e, ok := c.c.Get(sum)
	if !ok {
		return Identity{}, false
	}
	if !now.Before(e.until) {
		c.c.Remove(sum)
		return Identity{}, false
	}
	id := e.id
	id.Principal = clonePrincipal(e.id.Principal) // callers may change theirs
	return id, true
}

func (c *jwtCache) put(sum [32]byte, id Identity, until time.Time) {
	id.Principal = clonePrincipal(id.Principal)
	c.c.Add(sum, jwtEntry{id: id, until: until})
}
