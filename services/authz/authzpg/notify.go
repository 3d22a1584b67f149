package authzpg

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// Channel is the PostgreSQL notification channel of policy changes: every
// transaction that bumps the policy version notifies it with the new
// version (docs/decisions/0085-policy-propagation.md).
const Channel = "toolplane_authz_policy"

// ListenerApplicationName is the application_name of the listening
// connection (visible in pg_stat_activity).
const ListenerApplicationName = "toolplane-authz-listen"

var _ authzstore.Notifier = (*Store)(nil)

// Listen implements authzstore.Notifier: on a dedicated connection (not one
// of the pool's: it stays in LISTEN), it calls fn with the version of every
// committed policy change, from any process, until ctx ends. After every
// (re)connection it calls fn(0): notifications sent while it was
// disconnected are lost, so the caller re-reads the version. A broken
// connection is re-opened with a backoff from 100 ms to 5 s.
func (s *Store) Listen(ctx context.Context, fn func(version int64)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, fn, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		if s.onListenErr != nil {
			s.onListenErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func(int64), connected func()) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(c)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	fn(0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		v, perr := strconv.ParseInt(n.Payload, 10, 64)
		if perr != nil {
			v = 0
		}
		fn(v)
	}
}

// OnListenError sets a function told about every failure of the listening
// connection (for logs).
func (s *Store) OnListenError(f func(error)) { s.onListenErr = f }
