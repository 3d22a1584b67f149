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
// oauth_clients, migration 010; pending logins oauth_pending, 011).
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

// TokenAAD, ClientAAD and PendingAAD are the additional data sealing a row
// of oauth_tokens, oauth_clients and oauth_pending: the row's identity, so
// a sealed value moved to another row does not open. The PostgreSQL store
// (catalogpg) seals with the same.
func TokenAAD(server, tenant, subject string) []byte {
	return []byte("oauth_tokens\x00" + server + "\x00" + tenant + "\x00" + subject)
}

// ClientAAD: see TokenAAD.
func ClientAAD(server, issuer string) []byte {
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
	plain, err := c.o.keys.Open(keyID, sealed, TokenAAD(c.server, c.tenant, c.subject))
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
	id, sealed := c.o.keys.Seal(plain, TokenAAD(c.server, c.tenant, c.subject))
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

// PendingAAD: see TokenAAD.
func PendingAAD(state, server, tenant, subject string) []byte {
	return []byte("oauth_pending\x00" + state + "\x00" + server + "\x00" + tenant + "\x00" + subject)
}

var _ catalogoauth.PendingStore = (*connStore)(nil)

// SavePending implements catalogoauth.PendingStore; expired logins of
// every connection are deleted on the way.
func (c *connStore) SavePending(ctx context.Context, state string, p *catalogoauth.PendingLogin) error {
	plain, err := json.Marshal(p)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, PendingAAD(state, c.server, c.tenant, c.subject))
	return c.o.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_pending WHERE expires_at < ?`, time.Now().UnixMilli()); err != nil {
			return err
		}
		// At most MaxPendingLogins per connection: the oldest goes.
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_pending WHERE state IN (SELECT state FROM oauth_pending
			WHERE server = ? AND tenant = ? AND subject = ? ORDER BY expires_at DESC LIMIT -1 OFFSET ?)`,
			c.server, c.tenant, c.subject, catalogoauth.MaxPendingLogins-1); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_pending (state, server, tenant, subject, key_id, sealed, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			state, c.server, c.tenant, c.subject, id, sealed, p.Expires.UnixMilli())
		return err
	})
}

// TakePending implements catalogoauth.PendingStore: the row is deleted in
// the statement that reads it (single use, even with two callbacks racing).
func (c *connStore) TakePending(ctx context.Context, state string) (*catalogoauth.PendingLogin, error) {
	var keyID string
	var sealed []byte
	err := c.o.tx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `DELETE FROM oauth_pending WHERE state = ? AND server = ? AND tenant = ? AND subject = ? RETURNING key_id, sealed`,
			state, c.server, c.tenant, c.subject).Scan(&keyID, &sealed)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth pending login: %w", err)
	}
	return OpenPending(c.o.keys, keyID, sealed, state, c.server, c.tenant, c.subject)
}

// OpenPending opens a sealed pending login of (state, server, tenant,
// subject); the PostgreSQL store uses it too.
func OpenPending(keys *Keyring, keyID string, sealed []byte, state, server, tenant, subject string) (*catalogoauth.PendingLogin, error) {
	plain, err := keys.Open(keyID, sealed, PendingAAD(state, server, tenant, subject))
	if err != nil {
		return nil, fmt.Errorf("catalogstore: oauth pending login of %s: %w", server, err)
	}
	var p catalogoauth.PendingLogin
	if err := json.Unmarshal(plain, &p); err != nil {
		return nil, fmt.Errorf("catalogstore: oauth pending login of %s: corrupt", server)
	}
	return &p, nil
}

// LoginOwner returns the connection a pending login's state belongs to
// (ok false: none, or expired). The callback uses it to find the
// connection on whichever replica it lands.
func (o *OAuthStore) LoginOwner(ctx context.Context, state string) (server, tenant, subject string, ok bool, err error) {
	if state == "" || len(state) > catalogoauth.MaxStateBytes {
		return "", "", "", false, nil
	}
	err = o.db.QueryRowContext(ctx, `SELECT server, tenant, subject FROM oauth_pending WHERE state = ? AND expires_at >= ?`, state, time.Now().UnixMilli()).Scan(&server, &tenant, &subject)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", "", false, nil
	}
	if err != nil {
		return "", "", "", false, fmt.Errorf("catalogstore: oauth pending login: %w", err)
	}
	return server, tenant, subject, true, nil
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
	plain, err := c.o.keys.Open(keyID, sealed, ClientAAD(c.server, issuer))
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
	id, sealed := c.o.keys.Seal(plain, ClientAAD(c.server, issuer))
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
			aad := TokenAAD(r.a, r.b, r.c)
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
			aad := ClientAAD(r.a, r.b)
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
