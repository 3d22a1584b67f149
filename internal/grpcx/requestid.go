package grpcx

import (
	crand "crypto/rand"
	mrand "math/rand/v2"
	"sync"

	"github.com/google/uuid"
)

// idSources are ChaCha8 generators, each seeded from crypto/rand: a request
// id is a random (version 4) UUID as before, without a getrandom system
// call per RPC (uuid.NewString reads crypto/rand every time; about 1% of a
// catalog CallTool's CPU, docs/performance.md). A request id names a call
// in logs and errors; it is not a secret and grants nothing.
var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic("grpcx: crypto/rand: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return mrand.NewChaCha8(seed)
}}

// newRequestID returns a random version 4 UUID in its string form.
func newRequestID() string {
	src := idSources.Get().(*mrand.ChaCha8)
	var u uuid.UUID
	_, _ = src.Read(u[:])
	idSources.Put(src)
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}
