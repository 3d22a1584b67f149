package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Run leases across replicas (docs/decisions/0081-run-leases.md).
//
// Every runtime process has a replica id. A run it starts or resumes is
// stored RUNNING with the id as owner and a lease of runtime.run_lease
// (StartRun, atomic with the one-active-run-per-thread check across
// replicas). While it owns runs, the process renews their leases every
// third of the lease and polls their cancel flags every cancelPoll, so a
// CancelRun received by any replica stops the run within about a quarter
// second. Every process sweeps: a RUNNING run whose lease ended belongs to a
// replica that stopped and becomes INTERRUPTED. When a renewal finds that a
// run this process executes is no longer RUNNING under its id (a peer swept
// it after this process failed to renew in time), the local run is stopped.

// cancelPoll is how often an owner with runs polls their cancel flags.
const cancelPoll = 250 * time.Millisecond

// leaseReason is the reason of a run interrupted by the sweep.
const leaseReason = "lease_expired: the replica executing the run stopped (its lease of %s was not renewed)"

// newReplicaID returns "<hostname>-<8 hex>": unique per process, readable in
// the runs table.
func newReplicaID() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "runtime"
	}
	if len(h) > 48 {
		h = h[:48]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h + "-" + hex.EncodeToString(b[:])
}

// owned is the set of runs this process started and has not yet stored in
// a final status (by run id → thread id).
type owned struct {
	mu   sync.Mutex
	runs map[string]string
}

func (o *owned) add(threadID, runID string) {
	o.mu.Lock()
	if o.runs == nil {
		o.runs = map[string]string{}
	}
	o.runs[runID] = threadID
	o.mu.Unlock()
}

func (o *owned) has(runID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.runs[runID]
	return ok
}

func (o *owned) remove(runID string) {
	o.mu.Lock()
	delete(o.runs, runID)
	o.mu.Unlock()
}

func (o *owned) snapshot() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]string, len(o.runs))
	for k, v := range o.runs {
		out[k] = v
	}
	return out
}

// putRun stores a run for the agent loop: a RUNNING run through StartRun
// under this replica's lease (ErrRunBusy becomes runtimeloop.ErrRunActive,
// so RunTurn and ResumeRun answer RUN_ACTIVE), any other status with
// PutRun, which ends this process's ownership.
func (s *Server) putRun(ctx context.Context, r *runtimev1.Run) error {
	if r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
		if !s.owned.has(r.GetRunId()) {
			// Not executed here (CancelRun of a run waiting for input): a
			// peer may have resumed it since it was read; its run wins.
			ok, err := s.store.EndRunUnlessLeased(ctx, r, s.now())
			if err == nil && !ok {
				return fmt.Errorf("%w: the run was resumed on another replica", runtimeloop.ErrRunActive)
			}
			if errors.Is(err, runtimestore.ErrNotFound) {
				// A run written for the first time in a final status.
				err = s.store.PutRun(ctx, r)
			}
			return err
		}
		err := s.store.PutRun(ctx, r)
		if err == nil {
			s.owned.remove(r.GetRunId())
		}
		return err
	}
	now := s.now()
	err := s.store.StartRun(ctx, r, runtimestore.Lease{Owner: s.replica, Until: now.Add(s.cfg.RunLease)}, now)
	if errors.Is(err, runtimestore.ErrRunBusy) {
		return fmt.Errorf("%w: %w", runtimeloop.ErrRunActive, err)
	}
	if err == nil {
		s.owned.add(r.GetThreadId(), r.GetRunId())
	}
	return err
}

// leaseLoop renews this replica's leases, polls cancel flags and sweeps
// expired leases until ctx ends.
func (s *Server) leaseLoop(ctx context.Context) {
	poll := time.NewTicker(cancelPoll)
	defer poll.Stop()
	every := max(s.cfg.RunLease/3, cancelPoll)
	renew := time.NewTicker(every)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			s.pollCancels(ctx)
		case <-renew.C:
			s.renewLeases(ctx)
			s.sweepLeases(ctx)
		}
	}
}

// pollCancels stops the local runs a CancelRun on any replica flagged.
func (s *Server) pollCancels(ctx context.Context) {
	if len(s.owned.snapshot()) == 0 {
		return
	}
	e := s.loops.current()
	if e == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, cancelPoll*4)
	defer cancel()
	refs, err := s.store.CancelRequested(cctx, s.replica)
	if err != nil {
		s.log.Warn("polling run cancellations failed", "err", err)
		return
	}
	for _, r := range refs {
		e.CancelActive(r.ThreadID, r.RunID, runtimeloop.ErrCancelled)
	}
}

// renewLeases extends the leases of this replica's runs and stops the
// local runs the database no longer shows as RUNNING under this replica.
func (s *Server) renewLeases(ctx context.Context) {
	mine := s.owned.snapshot()
	if len(mine) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RunLease/3)
	defer cancel()
	got, err := s.store.RenewLeases(cctx, s.replica, s.now().Add(s.cfg.RunLease))
	if err != nil {
		s.log.Warn("renewing run leases failed", "err", err, "runs", len(mine))
		return
	}
	seen := make(map[string]bool, len(got))
	e := s.loops.current()
	for _, r := range got {
		seen[r.RunID] = true
		if r.CancelRequested && e != nil {
			e.CancelActive(r.ThreadID, r.RunID, runtimeloop.ErrCancelled)
		}
	}
	for runID, threadID := range mine {
		if seen[runID] {
			continue
		}
		// Written after the snapshot (finished) or taken by a peer's sweep.
		if e != nil && e.CancelActive(threadID, runID, runtimeloop.ErrShutdown) {
			s.log.Warn("run stopped: its lease was lost (a peer marked it interrupted)", "thread_id", threadID, "run_id", runID)
		}
		s.owned.remove(runID)
	}
}

// sweepLeases marks INTERRUPTED the runs of replicas that stopped.
func (s *Server) sweepLeases(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, max(s.cfg.RunLease/3, time.Second))
	defer cancel()
	n, err := s.store.InterruptExpired(cctx, fmt.Sprintf(leaseReason, s.cfg.RunLease), s.now())
	if err != nil {
		s.log.Warn("sweeping expired run leases failed", "err", err)
		return
	}
	if n > 0 {
		s.log.Warn("runs of a stopped replica marked interrupted", "runs", n)
	}
	// The idempotency window of ExecuteToolCall (idempotent.go).
	if _, err := s.store.PurgeToolCallsBefore(cctx, s.now().Add(-callWindow)); err != nil {
		s.log.Warn("purging old tool-call claims failed", "err", err)
	}
}
