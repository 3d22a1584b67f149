package authzpg

import (
	"context"
	"strconv"

	"github.com/toolplane/toolplane/internal/pgstore"
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

// Listen implements authzstore.Notifier: on a dedicated connection
// (pgstore.Listen), it calls fn with the version of every committed policy
// change, from any process, until ctx ends. After every (re)connection it
// calls fn(0): notifications sent while it was disconnected are lost, so
// the caller re-reads the version.
func (s *Store) Listen(ctx context.Context, fn func(version int64)) {
	pgstore.Listen(ctx, s.pool, Channel, ListenerApplicationName, func(payload string, reconnected bool) {
		v, err := strconv.ParseInt(payload, 10, 64)
		if reconnected || err != nil {
			v = 0
		}
		fn(v)
	}, s.onListenErr)
}

// OnListenError sets a function told about every failure of the listening
// connection (for logs).
func (s *Store) OnListenError(f func(error)) { s.onListenErr = f }
