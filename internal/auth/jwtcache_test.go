package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func hsToken(t testing.TB, key []byte, sub string, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": exp.Unix(), "tenant": "acme", "roles": []any{"user"}}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearer(tok string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
}

// TestJWTVerifiedOnce: a verified JWT is cached by its exact bytes until its
// exp (plus leeway); expiry, a changed signature and a changed payload are
// still refused; failures are not cached.
func TestJWTVerifiedOnce(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := NewAuthenticator(Options{Enabled: true, JWT: &JWTSpec{HMACSecret: key, Leeway: 5 * time.Second, TenantClaim: "tenant", RolesClaim: "roles", DefaultKind: KindUser}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	a.now = func() time.Time { return now }
	tok := hsToken(t, key, "bob", now.Add(time.Minute))

	id, err := a.Authenticate(bearer(tok))
	if err != nil || id.Principal.GetSubject() != "bob" || id.Principal.GetTenant() != "acme" {
		t.Fatalf("first: %v %v", id, err)
	}
	if a.verified.c.Len() != 1 {
		t.Fatalf("cache holds %d entries after one verification, want 1", a.verified.c.Len())
	}
	id.Principal.Subject = "mallory" // a caller changing its copy changes no one else's
	id2, err := a.Authenticate(bearer(tok))
	if err != nil || id2.Principal.GetSubject() != "bob" || len(id2.Principal.GetRoles()) != 1 {
		t.Fatalf("cached: %v %v", id2, err)
	}

	// Same header and payload, another signature: verified (and refused).
	parts := strings.Split(tok, ".")
	bad := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	if _, err := a.Authenticate(bearer(bad)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("forged signature: %v", err)
	}
	// Another key's token for the same subject is refused, and not cached.
	other := hsToken(t, []byte("another-key-another-key-another!!"), "bob", now.Add(time.Minute))
	for i := 0; i < 2; i++ {
		if _, err := a.Authenticate(bearer(other)); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("other key (%d): %v", i, err)
		}
	}
	if a.verified.c.Len() != 1 {
		t.Fatalf("failures were cached: %d entries", a.verified.c.Len())
	}

	// Inside the leeway after exp: still valid; past it: refused, like a fresh verification.
	now = now.Add(time.Minute + 4*time.Second)
	if _, err := a.Authenticate(bearer(tok)); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := a.Authenticate(bearer(tok)); status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "expired") {
		t.Fatalf("after exp + leeway: %v", err)
	}
	if a.verified.c.Len() != 0 {
		t.Fatalf("expired entry kept: %d", a.verified.c.Len())
	}
}

// BenchmarkJWTCredential: a repeat JWT costs a hash and a cache lookup, not
// a signature check (compare -run none -bench JWT with the cache removed).
func BenchmarkJWTCredential(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := NewAuthenticator(Options{Enabled: true, JWT: &JWTSpec{HMACSecret: key, TenantClaim: "tenant", RolesClaim: "roles", DefaultKind: KindUser}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := bearer(hsToken(b, key, "bob", time.Now().Add(time.Hour)))
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.Credential(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verified", func(b *testing.B) {
		for b.Loop() {
			a.verified.c.Purge()
			if _, err := a.Credential(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
