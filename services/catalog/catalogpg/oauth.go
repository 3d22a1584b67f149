package catalogpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// OAuth returns the store of the OAuth tokens, registered clients and
// pending logins of upstream MCP servers in catalog.oauth_* (migration
// 00003), sealed with keys exactly as catalogstore's sqlite tables are.
// Shared by every catalog replica on the database: a login started on one
// completes on any (catalogoauth.PendingStore), and renewals of one
// connection are serialised across replicas (catalogoauth.Locker).
func (s *Store) OAuth(keys *catalogstore.Keyring) *OAuthStore {
	return &OAuthStore{pool: s.pool, keys: keys}
}

// OAuthStore is the PostgreSQL OAuth store. Values never leave it unsealed
// except to the catalogoauth client they belong to.
type OAuthStore struct {
	pool *pgxpool.Pool
	keys *catalogstore.Keyring
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

var (
	_ catalogoauth.PendingStore = (*connStore)(nil)
	_ catalogoauth.Locker       = (*connStore)(nil)
)

// querier is what the statements below need: the pool, or the transaction
// holding a connection's lock.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type lockTxKey struct{}

// q returns the transaction LockToken put in ctx for this connection, else
// the pool: inside the lock every statement runs on the locking
// connection, so a renewal never waits for a second pool connection.
func (c *connStore) q(ctx context.Context) querier {
	if lt, ok := ctx.Value(lockTxKey{}).(lockTx); ok && lt.c == c.key() {
		return lt.tx
	}
	return c.o.pool
}

type lockTx struct {
	c  string
	tx pgx.Tx
}

// key names the connection (length-prefixed: names may hold any byte but NUL).
func (c *connStore) key() string {
	return fmt.Sprintf("oauth_tokens:%d:%s%d:%s%d:%s", len(c.server), c.server, len(c.tenant), c.tenant, len(c.subject), c.subject)
}

// LockToken implements catalogoauth.Locker: fn runs in a transaction
// holding pg_advisory_xact_lock on the connection's key (released at
// commit or rollback, also when the replica dies), with the store's
// statements on that transaction. fn's error rolls back and is returned
// as it is.
func (c *connStore) LockToken(ctx context.Context, fn func(ctx context.Context) error) error {
	tx, err := c.o.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("catalogpg: oauth lock: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, c.key()); err != nil {
		return fmt.Errorf("catalogpg: oauth lock: %w", err)
	}
	if err := fn(context.WithValue(ctx, lockTxKey{}, lockTx{c: c.key(), tx: tx})); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("catalogpg: oauth lock: %w", err)
	}
	return nil
}

// GetToken implements transport.TokenStore.
func (c *connStore) GetToken(ctx context.Context) (*transport.Token, error) {
	var keyID string
	var sealed []byte
	err := c.q(ctx).QueryRow(ctx, `SELECT key_id, sealed FROM catalog.oauth_tokens WHERE server = $1 AND tenant = $2 AND subject = $3`,
		c.server, c.tenant, c.subject).Scan(&keyID, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, transport.ErrNoToken
	}
	if err != nil {
		return nil, fmt.Errorf("catalogpg: oauth token: %w", err)
	}
	plain, err := c.o.keys.Open(keyID, sealed, catalogstore.TokenAAD(c.server, c.tenant, c.subject))
	if err != nil {
		return nil, fmt.Errorf("catalogpg: oauth token of %s: %w", c.server, err)
	}
	var t transport.Token
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, fmt.Errorf("catalogpg: oauth token of %s: corrupt", c.server)
	}
	return &t, nil
}

// SaveToken implements transport.TokenStore.
func (c *connStore) SaveToken(ctx context.Context, t *transport.Token) error {
	plain, err := json.Marshal(t)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, catalogstore.TokenAAD(c.server, c.tenant, c.subject))
	var exp *time.Time
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt.UTC()
		exp = &e
	}
	_, err = c.q(ctx).Exec(ctx, `INSERT INTO catalog.oauth_tokens (server, tenant, subject, key_id, sealed, expires_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (server, tenant, subject) DO UPDATE SET
		key_id = excluded.key_id, sealed = excluded.sealed, expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
		c.server, c.tenant, c.subject, id, sealed, exp)
	if err != nil {
		return fmt.Errorf("catalogpg: save oauth token: %w", err)
	}
	return nil
}

// DeleteToken implements catalogoauth.Store.
func (c *connStore) DeleteToken(ctx context.Context) error {
	if _, err := c.q(ctx).Exec(ctx, `DELETE FROM catalog.oauth_tokens WHERE server = $1 AND tenant = $2 AND subject = $3`, c.server, c.tenant, c.subject); err != nil {
		return fmt.Errorf("catalogpg: delete oauth token: %w", err)
	}
	return nil
}

// GetClient implements catalogoauth.Store.
func (c *connStore) GetClient(ctx context.Context, issuer string) (*catalogoauth.Registration, error) {
	var keyID string
	var sealed []byte
	err := c.q(ctx).QueryRow(ctx, `SELECT key_id, sealed FROM catalog.oauth_clients WHERE server = $1 AND issuer = $2`, c.server, issuer).Scan(&keyID, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, catalogoauth.ErrNoClient
	}
	if err != nil {
		return nil, fmt.Errorf("catalogpg: oauth client: %w", err)
	}
	plain, err := c.o.keys.Open(keyID, sealed, catalogstore.ClientAAD(c.server, issuer))
	if err != nil {
		return nil, fmt.Errorf("catalogpg: oauth client of %s: %w", c.server, err)
	}
	var r catalogoauth.Registration
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, fmt.Errorf("catalogpg: oauth client of %s: corrupt", c.server)
	}
	return &r, nil
}

// SaveClient implements catalogoauth.Store.
func (c *connStore) SaveClient(ctx context.Context, issuer string, r *catalogoauth.Registration) error {
	plain, err := json.Marshal(r)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, catalogstore.ClientAAD(c.server, issuer))
	_, err = c.q(ctx).Exec(ctx, `INSERT INTO catalog.oauth_clients (server, issuer, key_id, sealed, updated_at) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (server, issuer) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at`,
		c.server, issuer, id, sealed)
	if err != nil {
		return fmt.Errorf("catalogpg: save oauth client: %w", err)
	}
	return nil
}

// SavePending implements catalogoauth.PendingStore; expired logins of
// every connection are deleted on the way.
func (c *connStore) SavePending(ctx context.Context, state string, p *catalogoauth.PendingLogin) error {
	plain, err := json.Marshal(p)
	if err != nil {
		return err
	}
	id, sealed := c.o.keys.Seal(plain, catalogstore.PendingAAD(state, c.server, c.tenant, c.subject))
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM catalog.oauth_pending WHERE expires_at < now()`)
	// At most MaxPendingLogins per connection: the oldest goes.
	b.Queue(`DELETE FROM catalog.oauth_pending WHERE state IN (SELECT state FROM catalog.oauth_pending
		WHERE server = $1 AND tenant = $2 AND subject = $3 ORDER BY expires_at DESC OFFSET $4)`,
		c.server, c.tenant, c.subject, catalogoauth.MaxPendingLogins-1)
	b.Queue(`INSERT INTO catalog.oauth_pending (state, server, tenant, subject, key_id, sealed, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		state, c.server, c.tenant, c.subject, id, sealed, p.Expires.UTC())
	if err := c.o.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("catalogpg: save oauth pending login: %w", err)
	}
	return nil
}

// TakePending implements catalogoauth.PendingStore: the row is deleted by
// the statement that reads it (single use, even with two callbacks racing
// on two replicas).
func (c *connStore) TakePending(ctx context.Context, state string) (*catalogoauth.PendingLogin, error) {
	var keyID string
	var sealed []byte
	err := c.o.pool.QueryRow(ctx, `DELETE FROM catalog.oauth_pending WHERE state = $1 AND server = $2 AND tenant = $3 AND subject = $4 RETURNING key_id, sealed`,
		state, c.server, c.tenant, c.subject).Scan(&keyID, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("catalogpg: oauth pending login: %w", err)
	}
	return catalogstore.OpenPending(c.o.keys, keyID, sealed, state, c.server, c.tenant, c.subject)
}

// LoginOwner returns the connection a pending login's state belongs to
// (ok false: none, or expired), for the callback on whichever replica the
// browser lands.
func (o *OAuthStore) LoginOwner(ctx context.Context, state string) (server, tenant, subject string, ok bool, err error) {
	if state == "" || len(state) > catalogoauth.MaxStateBytes {
		return "", "", "", false, nil
	}
	err = o.pool.QueryRow(ctx, `SELECT server, tenant, subject FROM catalog.oauth_pending WHERE state = $1 AND expires_at >= now()`, state).Scan(&server, &tenant, &subject)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", "", false, nil
	}
	if err != nil {
		return "", "", "", false, fmt.Errorf("catalogpg: oauth pending login: %w", err)
	}
	return server, tenant, subject, true, nil
}

// Reseal re-encrypts every token and client row not sealed with the
// current key (key rotation) in one transaction, locking the rows it
// rewrites; it returns the number re-sealed. A row whose key is no longer
// in the keyring fails the whole call. Pending logins (10 minutes) are
// not re-sealed.
func (o *OAuthStore) Reseal(ctx context.Context) (int, error) {
	cur := o.keys.CurrentID()
	n := 0
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		type row struct {
			a, b, c, keyID string
			sealed         []byte
		}
		read := func(q string) ([]row, error) {
			rows, err := tx.Query(ctx, q, cur)
			if err != nil {
				return nil, err
			}
			var out []row
			var r row
			_, err = pgx.ForEachRow(rows, []any{&r.a, &r.b, &r.c, &r.keyID, &r.sealed}, func() error {
				out = append(out, r)
				return nil
			})
			return out, err
		}
		toks, err := read(`SELECT server, tenant, subject, key_id, sealed FROM catalog.oauth_tokens WHERE key_id <> $1 FOR UPDATE`)
		if err != nil {
			return err
		}
		for _, r := range toks {
			aad := catalogstore.TokenAAD(r.a, r.b, r.c)
			p, err := o.keys.Open(r.keyID, r.sealed, aad)
			if err != nil {
				return fmt.Errorf("token of %s: %w", r.a, err)
			}
			id, s := o.keys.Seal(p, aad)
			if _, err := tx.Exec(ctx, `UPDATE catalog.oauth_tokens SET key_id = $1, sealed = $2 WHERE server = $3 AND tenant = $4 AND subject = $5`, id, s, r.a, r.b, r.c); err != nil {
				return err
			}
			n++
		}
		cls, err := read(`SELECT server, issuer, '', key_id, sealed FROM catalog.oauth_clients WHERE key_id <> $1 FOR UPDATE`)
		if err != nil {
			return err
		}
		for _, r := range cls {
			aad := catalogstore.ClientAAD(r.a, r.b)
			p, err := o.keys.Open(r.keyID, r.sealed, aad)
			if err != nil {
				return fmt.Errorf("client of %s: %w", r.a, err)
			}
			id, s := o.keys.Seal(p, aad)
			if _, err := tx.Exec(ctx, `UPDATE catalog.oauth_clients SET key_id = $1, sealed = $2 WHERE server = $3 AND issuer = $4`, id, s, r.a, r.b); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalogpg: reseal: %w", err)
	}
	return n, nil
}
