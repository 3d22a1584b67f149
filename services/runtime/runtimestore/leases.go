package runtimestore

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// Run ownership across replicas (docs/decisions/0081-run-leases.md): a
// RUNNING run belongs to the replica that executes it (Lease.Owner) for as
// long as that replica renews its lease. A run whose lease expired belongs to
// a replica that stopped; any replica's sweeper marks it INTERRUPTED. Other
// replicas reach the owner through the database: CancelRun sets the run's
// cancel flag, which the owner polls.

// ErrRunBusy is returned by StartRun when the thread already has a RUNNING
// run under an unexpired lease (another replica executes it), or when the run
// itself is RUNNING under another owner's unexpired lease.
var ErrRunBusy = errors.New("runtimestore: a run is already active in this thread")

// Lease names the replica executing a RUNNING run and until when it holds it.
type Lease struct {
	// Owner is the replica id (unique per process).
	Owner string
	// Until is when the lease expires unless renewed.
	Until time.Time
}

// RunRef names one run.
type RunRef struct {
	// ThreadID is the run's thread.
	ThreadID string
	// RunID is the run.
	RunID string
}

// LeasedRun is a RUNNING run of one owner, as RenewLeases returns it.
type LeasedRun struct {
	RunRef
	// CancelRequested is set when a CancelRun (on any replica) asked the
	// owner to stop the run.
	CancelRequested bool
}

// RunLeases is the part of Store that makes runs safe across replicas.
// Memory, runtimesqlite and runtimepg implement it; runtimetest's suite
// checks them.
type RunLeases interface {
	// StartRun stores r (status RUNNING) owned by l and clears its cancel
	// flag, atomically with two checks made under the thread's lock: no
	// other run of the thread is RUNNING with a lease that ends after now,
	// and r itself is not RUNNING under another owner's lease that ends
	// after now. Either failing returns ErrRunBusy and writes nothing; a
	// missing thread is ErrNotFound. The same owner may call it again for
	// its run (a renewal with the new body).
	StartRun(ctx context.Context, r *runtimev1.Run, l Lease, now time.Time) error
	// RenewLeases sets the lease end of every RUNNING run of owner to until
	// in one statement and returns those runs with their cancel flags.
	RenewLeases(ctx context.Context, owner string, until time.Time) ([]LeasedRun, error)
	// CancelRequested returns the RUNNING runs of owner whose cancel flag is
	// set (cheap: polled often by an owner with runs).
	CancelRequested(ctx context.Context, owner string) ([]RunRef, error)
	// RequestCancel sets the cancel flag of a RUNNING run and returns its
	// owner; ok is false (and nothing changes) when the run is not RUNNING.
	// ErrNotFound when the run does not exist.
	RequestCancel(ctx context.Context, threadID, runID string) (owner string, ok bool, err error)
	// EndRunUnlessLeased stores r (a status other than RUNNING) unless the
	// stored run is RUNNING under a lease that ends after now — another
	// replica resumed it meanwhile — and reports whether it wrote.
	// ErrNotFound when the run does not exist.
	EndRunUnlessLeased(ctx context.Context, r *runtimev1.Run, now time.Time) (bool, error)
	// InterruptExpired marks INTERRUPTED (reason, end time now) every
	// RUNNING run whose lease ended before now — runs of replicas that
	// stopped — and returns how many changed. A run written by PutRun
	// without a lease counts as expired.
	InterruptExpired(ctx context.Context, reason string, now time.Time) (int, error)
	// SetEventSeq records seq as the sequence number of the last event of
	// a run (RunEvent.seq), so a ResumeRun on any replica continues the
	// run's numbering (docs/decisions/0089-run-event-seq.md). Every other
	// write of the run keeps it. ErrNotFound when the run does not exist.
	SetEventSeq(ctx context.Context, threadID, runID string, seq int64) error
	// EventSeq returns the recorded number (0 when none was recorded).
	// ErrNotFound when the run does not exist.
	EventSeq(ctx context.Context, threadID, runID string) (int64, error)
}

// Interrupted returns the body of run b marked INTERRUPTED with reason and
// end time now. For Store implementations.
func Interrupted(b []byte, reason string, now time.Time) ([]byte, error) {
	r := &runtimev1.Run{}
	if err := proto.Unmarshal(b, r); err != nil {
		return nil, err
	}
	r.Status = runtimev1.RunStatus_RUN_STATUS_INTERRUPTED
	r.Reason = reason
	r.EndTime = timestamppb.New(now)
	return proto.Marshal(r)
}

// Shared is implemented by stores several processes use at once
// (runtimepg): a starting runtime then interrupts only runs whose lease
// expired, not every RUNNING run.
type Shared interface {
	// Shared reports that other processes may hold runs in this store.
	Shared() bool
}

// Locker is implemented by stores shared by several processes
// (runtimepg): a named lock that holds across every process on the store
// (a PostgreSQL advisory lock). The runtime serialises the read-before-write
// check and the write per (thread, path) with it (docs/deerflow.md §6.2).
type Locker interface {
	// Lock waits for the lock named name (bounded by ctx) and returns its
	// release.
	Lock(ctx context.Context, name string) (unlock func(), err error)
}
