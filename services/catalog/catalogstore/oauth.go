package catalogstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

// OAuth returns the store of the OAuth tokens and registered clients of
// upstream MCP servers, sealed with keys (tables oauth_tokens and
// oauth_clients, migration 010).
func (s *Store) OAuth(keys *Keyring) *OAuthStore {
	return &OAuthStore{db: s.db.DB, tx: s.db.WithTx, keys: keys}
}

// OAuthStore seals every token and client secret with a Keyring. Values
// never leave it unsealed except to the catalogoauth client they belong to.
type OAuthStore struct {
	db   *sql.DB
	tx   func(context.Context, func(*sql.Tx) error) error
	keys *Keyring
}

// For returns the catalogoauth.Store of one connection ("" "" = the
// server's shared connection). Registered clients are per server.
func (o *OAuthStore) For(server, tenant, subject string) catalogoauth.Store {
	return &connStore{o: o, server: server, tenant: tenant, subject: subject}
}

type connStore struct {
	o                       *OAuthStore
	server, tenant, subject string
}

func tokenAAD(server, tenant, subject string) []byte {
	return []byte("oauth_tokens\x00" + server + "\x00" + tenant + "\x00" + subject)
}

func clientAAD(server, issuer string) []byte {
	return []byte("oauth_clients\x00" + server + "\x00" + issuer)
}

// GetToken implements transport.TokenStore.
func (c *connStore) GetToken(ctx context.Context) (*transport.Token, error) {
	var keyID string
	var sealed []byte
	err := c.o.db.QueryRowContext(ctx, `SELECT key_id, sealed FROM oauth_tokens WHERE server = ? AND tenant = ? AND subject = ?`,
		c.server, c.tenant, c.subject).Scan(&keyID, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, transport.ErrNoToken
	}
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth token: %w", err)
	}
	plain, err := c.o.keys.Open(keyID, sealed, tokenAAD(c.server, c.tenant, c.subject))
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth token of %s: %w", c.server, err)
	}
	var t transport.Token
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, fmt.Errorf("catalogstore: oauth token of %s: corrupt", c.server)
	}
	return &t, nil
}

// SaveToken implements transport.TokenStore.
func (c *connStore) SaveToken(ctx context.Context, t *transport.Token) error {
	plain, err := json.Marshal(t)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, tokenAAD(c.server, c.tenant, c.subject))
	var exp any
	if !t.ExpiresAt.IsZero() {
		exp = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return c.o.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens (server, tenant, subject, key_id, sealed, expires_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (server, tenant, subject) DO UPDATE SET
			key_id = excluded.key_id, sealed = excluded.sealed, expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
			c.server, c.tenant, c.subject, id, sealed, exp, now())
		return err
	})
}

// DeleteToken implements catalogoauth.Store.
func (c *connStore) DeleteToken(ctx context.Context) error {
	return c.o.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE server = ? AND tenant = ? AND subject = ?`, c.server, c.tenant, c.subject)
		return err
	})
}

// GetClient implements catalogoauth.Store.
func (c *connStore) GetClient(ctx context.Context, issuer string) (*catalogoauth.Registration, error) {
	var keyID string
	var sealed []byte
	err := c.o.db.QueryRowContext(ctx, `SELECT key_id, sealed FROM oauth_clients WHERE server = ? AND issuer = ?`, c.server, issuer).Scan(&keyID, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, catalogoauth.ErrNoClient
	}
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth client: %w", err)
	}
	plain, err := c.o.keys.Open(keyID, sealed, clientAAD(c.server, issuer))
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth client of %s: %w", c.server, err)
	}
	var r catalogoauth.Registration
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, fmt.Errorf("catalogstore: oauth client of %s: corrupt", c.server)
	}
	return &r, nil
}

// SaveClient implements catalogoauth.Store.
func (c *connStore) SaveClient(ctx context.Context, issuer string, r *catalogoauth.Registration) error {
	plain, err := json.Marshal(r)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, clientAAD(c.server, issuer))
	return c.o.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients (server, issuer, key_id, sealed, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (server, issuer) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at`,
			c.server, issuer, id, sealed, now())
		return err
	})
}

// Reseal re-encrypts every row not sealed with the current key (key
// rotation), in one transaction; it returns the number of rows re-sealed.
// A row whose key is no longer in the keyring fails the whole call.
func (o *OAuthStore) Reseal(ctx context.Context) (int, error) {
	cur := o.keys.CurrentID()
	n := 0
	err := o.tx(ctx, func(tx *sql.Tx) error {
		n = 0
		type row struct {
			a, b, c, keyID string
			sealed         []byte
		}
		read := func(q string) ([]row, error) {
			rows, err := tx.QueryContext(ctx, q, cur)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.a, &r.b, &r.c, &r.keyID, &r.sealed); err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, rows.Err()
		}
		toks, err := read(`SELECT server, tenant, subject, key_id, sealed FROM oauth_tokens WHERE key_id <> ?`)
		if err != nil {
			return err
		}
		for _, r := range toks {
			aad := tokenAAD(r.a, r.b, r.c)
			p, err := o.keys.Open(r.keyID, r.sealed, aad)
			if err != nil {
				return fmt.Errorf("token of %s: %w", r.a, err)
			}
			id, s := o.keys.Seal(p, aad)
			if _, err := tx.ExecContext(ctx, `UPDATE oauth_tokens SET key_id = ?, sealed = ? WHERE server = ? AND tenant = ? AND subject = ?`, id, s, r.a, r.b, r.c); err != nil {
				return err
			}
			n++
		}
		cls, err := read(`SELECT server, issuer, '', key_id, sealed FROM oauth_clients WHERE key_id <> ?`)
		if err != nil {
			return err
		}
		for _, r := range cls {
			aad := clientAAD(r.a, r.b)
			p, err := o.keys.Open(r.keyID, r.sealed, aad)
			if err != nil {
				return fmt.Errorf("client of %s: %w", r.a, err)
			}
			id, s := o.keys.Seal(p, aad)
			if _, err := tx.ExecContext(ctx, `UPDATE oauth_clients SET key_id = ?, sealed = ? WHERE server = ? AND issuer = ?`, id, s, r.a, r.b); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalogstore: reseal: %w", err)
	}
	return n, nil
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
