// Package runtimeretention removes old runtime state on a schedule
// (runtime.retention, docs/architecture.md §6): idle threads with their
// workspaces, finished runs, whole old turns of messages, and old
// artifacts.
package runtimeretention

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// Periods are runtime.retention: one period per kind of state, 0 = keep
// forever.
type Periods struct {
	Threads, Runs, Messages, Artifacts time.Duration
	// FrontDoorThreads removes the MCP front door's threads (metadata
	// FrontDoorMetadataKey set) idle this long; 0 or negative = only Threads
	// applies to them.
	FrontDoorThreads time.Duration
	// SweepInterval is how often Loop sweeps.
	SweepInterval time.Duration
}

// Sweeper runs retention passes over a store and the thread workspaces.
type Sweeper struct {
	Store     runtimestore.Store
	Workspace *runtimetools.Workspace
	Log       *slog.Logger
	Now       func() time.Time
}

// Loop sweeps every r.SweepInterval until ctx ends, while any period is set.
func (s *Sweeper) Loop(ctx context.Context, r Periods) {
	if r.Threads <= 0 && r.FrontDoorThreads <= 0 && r.Runs <= 0 && r.Messages <= 0 && r.Artifacts <= 0 {
		return
	}
	for {
		s.Sweep(ctx, r, s.Now())
		if !sleepCtx(ctx, r.SweepInterval) {
			return
		}
	}
}

// Sweep is one retention pass at now: threads idle longer than
// r.Threads (with their workspaces), finished runs started longer than
// r.Runs ago, whole turns of messages older than r.Messages
// (runtimestore.Store.PurgeMessagesBefore), and artifacts whose file was
// last modified longer than r.Artifacts ago (file and entry). A zero period
// keeps that kind forever. Failures are logged; the next pass retries.
func (s *Sweeper) Sweep(ctx context.Context, r Periods, now time.Time) {
	warn := func(kind string, err error) {
		if err != nil && ctx.Err() == nil {
			s.Log.Warn("retention sweep failed", "kind", kind, "error", err)
		}
	}
	if r.Threads > 0 {
		ids, err := s.Store.PurgeThreadsBefore(ctx, now.Add(-r.Threads))
		warn("threads", err)
		for _, id := range ids {
			_ = os.RemoveAll(s.Workspace.ThreadDir(id))
		}
		if len(ids) > 0 {
			s.Log.Info("retention removed threads", "threads", len(ids))
		}
	}
	if r.FrontDoorThreads > 0 && (r.Threads <= 0 || r.FrontDoorThreads < r.Threads) {
		n, err := s.purgeFrontDoor(ctx, now.Add(-r.FrontDoorThreads))
		warn("frontdoor_threads", err)
		if n > 0 {
			s.Log.Info("retention removed MCP front-door threads", "threads", n)
		}
	}
	if r.Runs > 0 {
		n, err := s.Store.PurgeRunsBefore(ctx, now.Add(-r.Runs))
		warn("runs", err)
		if n > 0 {
			s.Log.Info("retention removed runs", "runs", n)
		}
	}
	if r.Messages > 0 {
		n, err := s.Store.PurgeMessagesBefore(ctx, now.Add(-r.Messages))
		warn("messages", err)
		if n > 0 {
			s.Log.Info("retention removed messages", "messages", n)
		}
	}
	if r.Artifacts > 0 {
		n, err := s.purgeArtifacts(ctx, now.Add(-r.Artifacts))
		warn("artifacts", err)
		if n > 0 {
			s.Log.Info("retention removed artifacts", "artifacts", n)
		}
	}
}

// FrontDoorMetadataKey is the thread metadata key that marks a thread the
// MCP front door created (runtimemcp.MetadataBinding).
const FrontDoorMetadataKey = "mcp_binding"

// frontDoorPage is how many idle threads one IdleThreads call reads.
const frontDoorPage = 500

// purgeFrontDoor deletes the front-door threads (with their subagent
// threads and workspaces) not updated since cutoff. A store without
// runtimestore.IdleThreadScanner is an error (logged each sweep), not a
// silent keep.
func (s *Sweeper) purgeFrontDoor(ctx context.Context, cutoff time.Time) (int, error) {
	sc, ok := s.Store.(runtimestore.IdleThreadScanner)
	if !ok {
		return 0, fmt.Errorf("the runtime store %T cannot list idle threads; runtime.retention.frontdoor_threads does not apply", s.Store)
	}
	n, after := 0, ""
	for {
		page, err := sc.IdleThreads(ctx, cutoff, after, frontDoorPage)
		if err != nil {
			return n, err
		}
		for _, th := range page {
			after = th.Proto.GetThreadId()
			if th.Proto.GetMetadata()[FrontDoorMetadataKey] == "" {
				continue
			}
			if err := s.deleteTree(ctx, after, 0); err != nil {
				return n, err
			}
			n++
		}
		if len(page) < frontDoorPage {
			return n, nil
		}
	}
}

// deleteTree deletes a thread's subagent threads (at most 8 levels) and
// the thread, each with its workspace.
func (s *Sweeper) deleteTree(ctx context.Context, id string, depth int) error {
	if depth < 8 {
		kids, err := s.Store.ChildThreads(ctx, id)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := s.deleteTree(ctx, k, depth+1); err != nil {
				return err
			}
		}
	}
	if err := s.Store.DeleteThread(ctx, id); err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
		return err
	}
	return os.RemoveAll(s.Workspace.ThreadDir(id))
}

// purgeArtifacts removes, in every thread with a workspace, the artifacts
// whose file was last modified before cutoff (or no longer exists): the
// file (through os.Root, so a symlink cannot reach outside the thread) and
// the thread's entry. The entry removal does not count as activity
// (runtimestore.NoTouch), so it never delays thread retention.
func (s *Sweeper) purgeArtifacts(ctx context.Context, cutoff time.Time) (int, error) {
	dirs, err := os.ReadDir(s.Workspace.ThreadsDir())
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, d := range dirs {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		id := d.Name()
		th, err := s.Store.GetThread(ctx, id)
		if err != nil || len(th.Proto.GetArtifacts()) == 0 {
			continue
		}
		root, err := os.OpenRoot(filepath.Join(s.Workspace.ThreadDir(id), "user-data"))
		if err != nil {
			continue
		}
		gone := map[string]bool{}
		for _, a := range th.Proto.GetArtifacts() {
			_, rel, err := runtimetools.CleanVirtual(a.GetPath(), false)
			if err != nil {
				continue
			}
			fi, err := root.Lstat(rel)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				gone[a.GetPath()] = true
			case err == nil && fi.ModTime().Before(cutoff):
				if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("thread %s: %s: %w", id, a.GetPath(), err))
					continue
				}
				gone[a.GetPath()] = true
			}
		}
		_ = root.Close()
		if len(gone) == 0 {
			continue
		}
		_, err = s.Store.UpdateThread(runtimestore.NoTouch(ctx), id, func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
			t.Proto.Artifacts = slices.DeleteFunc(t.Proto.Artifacts, func(a *runtimev1.Artifact) bool { return gone[a.GetPath()] })
			return nil, nil
		})
		if err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		total += len(gone)
	}
	return total, errors.Join(errs...)
}

// sleepCtx waits d, or less when ctx ends; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
