package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen follows the PostgreSQL notification channel on a dedicated
// connection (not one of the pool's: it stays in LISTEN), opened from the
// pool's connection settings with application_name appName (visible in
// pg_stat_activity). It calls fn with the payload of every notification,
// from any process, until ctx ends. After every (re)connection it calls
// fn("", true): notifications sent while it was disconnected are lost, so
// the caller re-reads whatever the channel announces. A broken connection
// is re-opened with a backoff from 100 ms to 5 s; onErr (may be nil) is
// told about each failure, for logs. Callers keep a periodic version
// check as the fallback of a lost notification
// (docs/decisions/0085-policy-propagation.md, 0087-catalog-config-in-postgresql.md).
func Listen(ctx context.Context, pool *pgxpool.Pool, channel, appName string, fn func(payload string, reconnected bool), onErr func(error)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, channel, appName, fn, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		if onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel, appName string, fn func(string, bool), connected func()) error {
	conn, err := dedicated(ctx, pool, appName)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	fn("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload, false)
	}
}

// Notify sends payload on channel inside tx: PostgreSQL delivers it when
// (and only if) tx commits.
func Notify(ctx context.Context, tx pgx.Tx, channel, payload string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
	return err
}

// dedicated opens a connection of its own with the pool's settings.
func dedicated(ctx context.Context, pool *pgxpool.Pool, appName string) (*pgx.Conn, error) {
	cfg := pool.Config().ConnConfig.Copy()
	if appName != "" {
		cfg.RuntimeParams["application_name"] = appName
	}
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	return pgx.ConnectConfig(cctx, cfg)
}

func closeConn(conn *pgx.Conn) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = conn.Close(c)
}
