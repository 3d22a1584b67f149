package catalogstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Keyring holds the AES-256 keys that seal OAuth secrets at rest
// (docs/architecture.md §10.6). The first key seals; every key opens, so a
// new key can be put first and the rows re-sealed (OAuthStore.Reseal)
// before the old one is removed. A key's id is the first 16 hex digits of
// SHA-256 of the key, stored on every ciphertext.
type Keyring struct {
	ids  []string
	aead map[string]cipher.AEAD
	// first is the sealing key's bytes (Derive).
	first []byte
}

// ParseKeyring reads keys, one per line (blank lines and # comments
// skipped), each 32 bytes in base64 (standard or URL alphabet) or 64 hex
// digits. The error names the line, never the key.
func ParseKeyring(text string) (*Keyring, error) {
	k := &Keyring{aead: map[string]cipher.AEAD{}}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("key line %d: %w", i+1, err)
		}
		sum := sha256.Sum256(raw)
		id := hex.EncodeToString(sum[:8])
		if _, dup := k.aead[id]; dup {
			return nil, fmt.Errorf("key line %d: the same key twice", i+1)
		}
		block, _ := aes.NewCipher(raw)
		gcm, _ := cipher.NewGCM(block)
		if len(k.ids) == 0 {
			k.first = raw
		}
		k.ids = append(k.ids, id)
		k.aead[id] = gcm
	}
	if len(k.ids) == 0 {
		return nil, errors.New("no key")
	}
	return k, nil
}

// LoadKeyring reads the keyring from the file path, or else from the
// environment variable env (exactly one must be given).
func LoadKeyring(path, env string) (*Keyring, error) {
	switch {
	case path != "" && env != "":
		return nil, errors.New("give key_file or key_env, not both")
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("key_file: %w", err)
		}
		k, err := ParseKeyring(string(b))
		if err != nil {
			return nil, fmt.Errorf("key_file %s: %w", path, err)
		}
		return k, nil
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return nil, fmt.Errorf("key_env: environment variable %s is not set", env)
		}
		k, err := ParseKeyring(strings.ReplaceAll(v, ",", "\n"))
		if err != nil {
			return nil, fmt.Errorf("key_env %s: %w", env, err)
		}
		return k, nil
	}
	return nil, errors.New("no key_file or key_env")
}

func decodeKey(s string) ([]byte, error) {
	if len(s) == 64 {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("want 32 bytes, got %d", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("not base64 or hex")
}

// Derive returns a 32-byte key for purpose label, derived from the sealing
// key (HMAC-SHA256 of the label): the same on every replica sharing the
// keyring, unrelated to the sealing key itself.
func (k *Keyring) Derive(label string) []byte {
	m := hmac.New(sha256.New, k.first)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// CurrentID is the id of the sealing key.
func (k *Keyring) CurrentID() string { return k.ids[0] }

// Seal encrypts plain under the current key, bound to aad.
func (k *Keyring) Seal(plain, aad []byte) (keyID string, sealed []byte) {
	id := k.ids[0]
	g := k.aead[id]
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	_, _ = rand.Read(nonce)
	return id, g.Seal(nonce, nonce, plain, aad)
}

// ErrUnknownKey: the ciphertext's key is not in the keyring.
var ErrUnknownKey = errors.New("sealed with a key not in the keyring")

// Open decrypts a sealed value; a wrong key, aad or a tampered value fails.
func (k *Keyring) Open(keyID string, sealed, aad []byte) ([]byte, error) {
	g, ok := k.aead[keyID]
	if !ok {
		return nil, fmt.Errorf("%w (key id %s)", ErrUnknownKey, keyID)
	}
	if len(sealed) < g.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	p, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], aad)
	if err != nil {
		return nil, errors.New("sealed value does not open (wrong key, wrong row, or tampered)")
	}
	return p, nil
}
