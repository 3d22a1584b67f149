package catalogstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// TestOAuthStoreSealedAtRest: tokens and client secrets are stored only
// sealed (the sqlite file holds no plaintext), with the key id; a row
// copied to another connection does not open; a wrong key fails closed;
// rotation re-seals every row under the new key.
func TestOAuthStoreSealedAtRest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	k1 := newKey(t)
	keys, err := ParseKeyring(k1)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, path)
	o := s.OAuth(keys)
	alice := o.For("tracker", "t1", "alice")
	if _, err := alice.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
		t.Fatalf("empty: %v", err)
	}
	tok := &transport.Token{AccessToken: "AT-very-secret-123", RefreshToken: "RT-very-secret-456", TokenType: "Bearer", ExpiresAt: time.Now().Add(time.Hour).Round(time.Second)}
	if err := alice.SaveToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := alice.SaveClient(ctx, "https://as.example", &catalogoauth.Registration{ClientID: "cid", ClientSecret: "CS-very-secret-789", AuthMethod: "client_secret_basic"}); err != nil {
		t.Fatal(err)
	}
	got, err := alice.GetToken(ctx)
	if err != nil || got.AccessToken != tok.AccessToken || got.RefreshToken != tok.RefreshToken || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Bob has no token; clients are per server.
	bob := o.For("tracker", "t1", "bob")
	if _, err := bob.GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
		t.Fatalf("bob sees a token: %v", err)
	}
	if r, err := bob.GetClient(ctx, "https://as.example"); err != nil || r.ClientSecret != "CS-very-secret-789" {
		t.Fatalf("client: %+v %v", r, err)
	}
	if _, err := bob.GetClient(ctx, "https://other.example"); !errors.Is(err, catalogoauth.ErrNoClient) {
		t.Fatalf("other issuer: %v", err)
	}
	var keyID string
	if err := s.db.QueryRow(`SELECT key_id FROM oauth_tokens`).Scan(&keyID); err != nil || keyID != keys.CurrentID() {
		t.Fatalf("key id %q %v", keyID, err)
	}
	s.Close()
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		for _, secret := range []string{"AT-very-secret", "RT-very-secret", "CS-very-secret"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("%s holds %s in clear", filepath.Base(f), secret)
			}
		}
	}

	// A row moved to another principal does not open.
	s = openStore(t, path)
	if _, err := s.db.Exec(`UPDATE oauth_tokens SET subject = 'mallory'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OAuth(keys).For("tracker", "t1", "mallory").GetToken(ctx); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("moved row opened: %v", err)
	}
	if _, err := s.db.Exec(`UPDATE oauth_tokens SET subject = 'alice'`); err != nil {
		t.Fatal(err)
	}
	// Another key: fails closed, naming the key id.
	other, _ := ParseKeyring(newKey(t))
	if _, err := s.OAuth(other).For("tracker", "t1", "alice").GetToken(ctx); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("wrong key: %v", err)
	}
	// Rotation: new key first, old key kept to read; Reseal moves every row.
	k2 := newKey(t)
	rot, err := ParseKeyring(k2 + "\n" + k1)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.OAuth(rot).Reseal(ctx)
	if err != nil || n != 2 {
		t.Fatalf("reseal: %d %v", n, err)
	}
	onlyNew, _ := ParseKeyring(k2)
	if got, err := s.OAuth(onlyNew).For("tracker", "t1", "alice").GetToken(ctx); err != nil || got.RefreshToken != tok.RefreshToken {
		t.Fatalf("after rotation: %+v %v", got, err)
	}
	if n, err := s.OAuth(rot).Reseal(ctx); err != nil || n != 0 {
		t.Fatalf("second reseal: %d %v", n, err)
	}
	if err := s.OAuth(onlyNew).For("tracker", "t1", "alice").DeleteToken(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OAuth(onlyNew).For("tracker", "t1", "alice").GetToken(ctx); !errors.Is(err, transport.ErrNoToken) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestParseKeyring: bad key material is an error naming the line only.
func TestParseKeyring(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no key"},
		{"# only a comment\n", "no key"},
		{"c2hvcnQ=", "key line 1: want 32 bytes, got 5"},
		{"not base64 !!", "key line 1: not base64 or hex"},
	} {
		_, err := ParseKeyring(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
	k := newKey(t)
	if _, err := ParseKeyring(k + "\n" + k); err == nil || !strings.Contains(err.Error(), "the same key twice") {
		t.Errorf("duplicate: %v", err)
	}
	hex64 := strings.Repeat("ab", 32)
	if kr, err := ParseKeyring(hex64); err != nil || len(kr.CurrentID()) != 16 {
		t.Errorf("hex: %v", err)
	}
	t.Setenv("TP_TEST_OAUTH_KEY", k)
	if _, err := LoadKeyring("", "TP_TEST_OAUTH_KEY"); err != nil {
		t.Errorf("env: %v", err)
	}
	if _, err := LoadKeyring("", "TP_TEST_OAUTH_KEY_UNSET"); err == nil || !strings.Contains(err.Error(), "TP_TEST_OAUTH_KEY_UNSET is not set") {
		t.Errorf("unset env: %v", err)
	}
}
