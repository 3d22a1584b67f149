package runtime

import (
	"context"

	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// chainWorkspace is the workspace the tool-call chain sees: the
// read-before-write gate's lock per (thread, path) is the in-process lock,
// plus — on a store shared by several replicas (runtimestore.Locker,
// PostgreSQL) — an advisory lock on the database, so a check and its write
// are serialised across replicas writing one shared workspace volume
// (docs/decisions/0084-cross-replica-locks.md).
type chainWorkspace struct {
	*runtimetools.Workspace
	shared runtimestore.Locker // nil: one process
}

// Lock implements runtimechain.Workspace.
func (w chainWorkspace) Lock(ctx context.Context, key string) (func(), error) {
	local := w.Workspace.Lock(key)
	if w.shared == nil {
		return local, nil
	}
	unlock, err := w.shared.Lock(ctx, "runtime.read_before_write."+key)
	if err != nil {
		local()
		return nil, err
	}
	return func() { unlock(); local() }, nil
}
