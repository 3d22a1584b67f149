// Package runtimetest holds test infrastructure of the runtime: the store
// conformance suite every runtimestore.Store implementation passes, and
// in-process fakes of the catalog, authz and skills gRPC services used to
// test the runtime's pipelines before (and independently of) the real
// services.
package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Factory opens a store. Reopen, when non-nil, closes the store and opens it
// again on the same backing data (persistence checks); nil skips them.
type Factory struct {
	Open   func(t *testing.T) runtimestore.Store
	Reopen func(t *testing.T, s runtimestore.Store) runtimestore.Store
}

func newThread(id, tenant, subject string, at time.Time) *runtimestore.Thread {
	return &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: id, OwnerTenant: tenant, OwnerSubject: subject,
		CreateTime: timestamppb.New(at), UpdateTime: timestamppb.New(at)}, ReadMarks: map[string]string{}}
}

// RunStoreSuite runs the conformance suite against f.
func RunStoreSuite(t *testing.T, f Factory) {
	ctx := context.Background()
	t.Run("ThreadsCRUDAndOwnerListing", func(t *testing.T) {
		s := f.Open(t)
		base := time.Now()
		for i := 0; i < 5; i++ {
			if err := s.CreateThread(ctx, newThread(fmt.Sprintf("a%d", i), "t1", "alice", base.Add(time.Duration(i)*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateThread(ctx, newThread("b0", "t1", "bob", base)); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateThread(ctx, newThread("a0", "t1", "alice", base)); !errors.Is(err, runtimestore.ErrExists) {
			t.Fatalf("duplicate create: got %v, want ErrExists", err)
		}
		var got []string
		tok := ""
		for {
			page, next, err := s.ListThreads(ctx, "t1", "alice", runtimestore.Page{Limit: 2, Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range page {
				got = append(got, th.Proto.GetThreadId())
			}
			if next == "" {
				break
			}
			tok = next
		}
		if fmt.Sprint(got) != "[a4 a3 a2 a1 a0]" {
			t.Fatalf("alice's threads newest first: got %v", got)
		}
		if _, err := s.GetThread(ctx, "nope"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("GetThread(nope) = %v, want ErrNotFound", err)
		}
		if err := s.DeleteThread(ctx, "a0"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteThread(ctx, "a0"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("second delete = %v, want ErrNotFound", err)
		}
	})
	t.Run("ChildThreadsHiddenAndKept", func(t *testing.T) {
		s := f.Open(t)
		base := time.Now()
		if err := s.CreateThread(ctx, newThread("p", "t1", "alice", base)); err != nil {
			t.Fatal(err)
		}
		c := newThread("c", "t1", "alice", base.Add(time.Second))
		c.Child = &runtimestore.Child{ParentThreadID: "p", ParentRunID: "r1", SubagentType: "researcher",
			Agent: &runtimev1.Agent{Name: "lead", Skills: &typev1.StringList{Values: []string{"x"}}}}
		if err := s.CreateThread(ctx, c); err != nil {
			t.Fatal(err)
		}
		page, _, err := s.ListThreads(ctx, "t1", "alice", runtimestore.Page{Limit: 10})
		if err != nil || len(page) != 1 || page[0].Proto.GetThreadId() != "p" || page[0].Child != nil {
			t.Fatalf("ListThreads shows children: %v %v", page, err)
		}
		// UpdateThread keeps the marker even when fn drops it.
		if _, err := s.UpdateThread(ctx, "c", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
			th.Child = nil
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		check := func(s runtimestore.Store) {
			t.Helper()
			got, err := s.GetThread(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			ch := got.Child
			if ch == nil || ch.ParentThreadID != "p" || ch.ParentRunID != "r1" || ch.SubagentType != "researcher" ||
				ch.Agent.GetName() != "lead" || fmt.Sprint(ch.Agent.GetSkills().GetValues()) != "[x]" {
				t.Fatalf("child marker: %+v", ch)
			}
			if p, _ := s.GetThread(ctx, "p"); p.Child != nil {
				t.Fatalf("parent marked as a child: %+v", p.Child)
			}
		}
		check(s)
		if f.Reopen != nil {
			s = f.Reopen(t, s)
			check(s)
		}
		if kids, err := s.ChildThreads(ctx, "p"); err != nil || fmt.Sprint(kids) != "[c]" {
			t.Fatalf("ChildThreads(p) = %v, %v", kids, err)
		}
		if kids, err := s.ChildThreads(ctx, "c"); err != nil || len(kids) != 0 {
			t.Fatalf("ChildThreads(c) = %v, %v", kids, err)
		}
	})
	t.Run("RetentionOfRunsAndMessages", func(t *testing.T) {
		s := f.Open(t)
		now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC) // a fixed clock
		ago := func(h int) *timestamppb.Timestamp { return timestamppb.New(now.Add(-time.Duration(h) * time.Hour)) }
		msg := func(id string, role runtimev1.MessageRole, h int) *runtimev1.Message {
			return &runtimev1.Message{Id: id, Role: role, CreateTime: ago(h)}
		}
		const (
			user = runtimev1.MessageRole_MESSAGE_ROLE_USER
			asst = runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT
			tool = runtimev1.MessageRole_MESSAGE_ROLE_TOOL
		)
		for _, id := range []string{"mixed", "old", "new", "noturn"} {
			if err := s.CreateThread(ctx, newThread(id, "t1", "alice", now.Add(-6*time.Hour))); err != nil {
				t.Fatal(err)
			}
		}
		// mixed: turn 1 entirely before the cutoff (2h ago); turn 2 started
		// before it and ends after it, so it is kept whole.
		_ = s.AppendMessages(ctx, "mixed", msg("u1", user, 5), msg("a1", asst, 5), msg("t1", tool, 4), msg("f1", asst, 4),
			msg("u2", user, 3), msg("a2", asst, 3), msg("t2", tool, 1), msg("f2", asst, 1))
		_ = s.AppendMessages(ctx, "old", msg("o1", user, 5), msg("o2", asst, 5))
		_ = s.AppendMessages(ctx, "new", msg("n1", user, 1), msg("n2", asst, 1))
		// noturn: no user message opens the recent part: nothing goes.
		_ = s.AppendMessages(ctx, "noturn", msg("x1", asst, 5), msg("x2", tool, 1))
		n, err := s.PurgeMessagesBefore(ctx, now.Add(-2*time.Hour))
		if err != nil || n != 6 {
			t.Fatalf("PurgeMessagesBefore = %d, %v; want 6", n, err)
		}
		ids := func(th string) string {
			ms, _, err := s.ListMessages(ctx, th, runtimestore.Page{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range ms {
				out = append(out, m.GetId())
			}
			return fmt.Sprint(out)
		}
		for th, want := range map[string]string{"mixed": "[u2 a2 t2 f2]", "old": "[]", "new": "[n1 n2]", "noturn": "[x1 x2]"} {
			if got := ids(th); got != want {
				t.Errorf("%s after message retention: %s, want %s", th, got, want)
			}
		}
		if n, err := s.PurgeMessagesBefore(ctx, now.Add(-2*time.Hour)); err != nil || n != 0 {
			t.Fatalf("second sweep = %d, %v; want 0", n, err)
		}
		// Runs: only finished runs that started before the cutoff go.
		for _, r := range []struct {
			id string
			st runtimev1.RunStatus
			h  int
		}{{"done", runtimev1.RunStatus_RUN_STATUS_COMPLETED, 5}, {"busy", runtimev1.RunStatus_RUN_STATUS_RUNNING, 5},
			{"asks", runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT, 5}, {"recent", runtimev1.RunStatus_RUN_STATUS_FAILED, 1}} {
			if err := s.PutRun(ctx, &runtimev1.Run{RunId: r.id, ThreadId: "mixed", Status: r.st, StartTime: ago(r.h)}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.PurgeRunsBefore(ctx, now.Add(-2*time.Hour)); err != nil || n != 1 {
			t.Fatalf("PurgeRunsBefore = %d, %v; want 1", n, err)
		}
		runs, _ := s.ListRuns(ctx, "mixed")
		var left []string
		for _, r := range runs {
			left = append(left, r.GetRunId())
		}
		if slices.Sort(left); fmt.Sprint(left) != "[asks busy recent]" {
			t.Fatalf("runs after retention: %v", left)
		}
		// NoTouch keeps update_time; a plain update bumps it.
		if _, err := s.UpdateThread(runtimestore.NoTouch(ctx), "old", func(*runtimestore.Thread) ([]*runtimev1.Message, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		if th, _ := s.GetThread(ctx, "old"); !th.Proto.GetUpdateTime().AsTime().Equal(now.Add(-6 * time.Hour)) {
			t.Fatalf("NoTouch update moved update_time to %v", th.Proto.GetUpdateTime().AsTime())
		}
		if _, err := s.UpdateThread(ctx, "old", func(*runtimestore.Thread) ([]*runtimev1.Message, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		if th, _ := s.GetThread(ctx, "old"); th.Proto.GetUpdateTime().AsTime().Equal(now.Add(-6 * time.Hour)) {
			t.Fatal("a plain update kept update_time")
		}
	})
	t.Run("UpdateIsAtomicUnderConcurrency", func(t *testing.T) {
		s := f.Open(t)
		if err := s.CreateThread(ctx, newThread("c", "t", "u", time.Now())); err != nil {
			t.Fatal(err)
		}
		const n = 100
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.UpdateThread(ctx, "c", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
					// Per-tool promotions under alternating catalog hashes
					// (an unrelated catalog change between searches) must
					// all be kept (docs/architecture.md §3.1).
					name := fmt.Sprintf("tool_%03d", i)
					th.Proto.Promoted = runtimestore.MergePromoted(th.Proto.Promoted, &runtimev1.Promoted{CatalogHash: fmt.Sprintf("h%d", i%2),
						Names: []string{name}, Tools: []*runtimev1.PromotedTool{{Name: name, DefinitionHash: "d" + name}}})
					return []*runtimev1.Message{{Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, Content: fmt.Sprint(i)}}, nil
				})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		th, err := s.GetThread(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		if got, tools := len(th.Proto.GetPromoted().GetNames()), len(th.Proto.GetPromoted().GetTools()); got != n || tools != n {
			t.Fatalf("promotions kept: %d names, %d tools; want %d", got, tools, n)
		}
		msgs, _, err := s.ListMessages(ctx, "c", runtimestore.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != n {
			t.Fatalf("messages appended with the updates: %d, want %d", len(msgs), n)
		}
	})
	t.Run("FailedUpdateRollsBack", func(t *testing.T) {
		s := f.Open(t)
		if err := s.CreateThread(ctx, newThread("r", "t", "u", time.Now())); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		_, err := s.UpdateThread(ctx, "r", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
			th.Proto.Agent = "changed"
			return []*runtimev1.Message{{Content: "x"}}, boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		th, _ := s.GetThread(ctx, "r")
		msgs, _, _ := s.ListMessages(ctx, "r", runtimestore.Page{})
		if th.Proto.GetAgent() != "" || len(msgs) != 0 {
			t.Fatalf("rolled-back update leaked: agent %q, %d messages", th.Proto.GetAgent(), len(msgs))
		}
		if _, err := s.UpdateThread(ctx, "missing", func(*runtimestore.Thread) ([]*runtimev1.Message, error) { return nil, nil }); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("update missing = %v", err)
		}
	})
	t.Run("MessagesPaging", func(t *testing.T) {
		s := f.Open(t)
		_ = s.CreateThread(ctx, newThread("m", "t", "u", time.Now()))
		for i := 0; i < 7; i++ {
			if err := s.AppendMessages(ctx, "m", &runtimev1.Message{Content: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		tok := ""
		for {
			page, next, err := s.ListMessages(ctx, "m", runtimestore.Page{Limit: 3, Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page {
				if m.GetId() == "" || m.GetCreateTime() == nil {
					t.Fatalf("message without id or time: %v", m)
				}
				got = append(got, m.GetContent())
			}
			if next == "" {
				break
			}
			tok = next
		}
		if fmt.Sprint(got) != "[0 1 2 3 4 5 6]" {
			t.Fatalf("messages oldest first: %v", got)
		}
		if err := s.AppendMessages(ctx, "nope", &runtimev1.Message{}); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("append to missing thread = %v", err)
		}
	})
	t.Run("RunsAndInterrupt", func(t *testing.T) {
		s := f.Open(t)
		_ = s.CreateThread(ctx, newThread("x", "t", "u", time.Now()))
		now := time.Now()
		if err := s.PutRun(ctx, &runtimev1.Run{RunId: "r1", ThreadId: "x", Status: runtimev1.RunStatus_RUN_STATUS_COMPLETED, StartTime: timestamppb.New(now)}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRun(ctx, &runtimev1.Run{RunId: "r2", ThreadId: "x", Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.New(now.Add(time.Second))}); err != nil {
			t.Fatal(err)
		}
		if f.Reopen != nil {
			s = f.Reopen(t, s)
		}
		n, err := s.InterruptUnfinished(ctx, "process restarted", now.Add(time.Minute))
		if err != nil || n != 1 {
			t.Fatalf("InterruptUnfinished = %d, %v; want 1", n, err)
		}
		runs, err := s.ListRuns(ctx, "x")
		if err != nil || len(runs) != 2 {
			t.Fatalf("ListRuns = %v, %v", runs, err)
		}
		if runs[0].GetRunId() != "r2" || runs[0].GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED || runs[0].GetEndTime() == nil {
			t.Fatalf("newest run not interrupted: %v", runs[0])
		}
		if runs[1].GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
			t.Fatalf("finished run changed: %v", runs[1])
		}
		if _, err := s.GetRun(ctx, "x", "zz"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("GetRun missing = %v", err)
		}
	})
	t.Run("RunLeases", func(t *testing.T) {
		s := f.Open(t)
		now := time.Now()
		_ = s.CreateThread(ctx, newThread("x", "t", "u", now))
		_ = s.CreateThread(ctx, newThread("y", "t", "u", now))
		run := func(thread, id string) *runtimev1.Run {
			return &runtimev1.Run{RunId: id, ThreadId: thread, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.New(now)}
		}
		a := runtimestore.Lease{Owner: "replica-a", Until: now.Add(30 * time.Second)}
		b := runtimestore.Lease{Owner: "replica-b", Until: now.Add(30 * time.Second)}
		if err := s.StartRun(ctx, run("x", "r1"), a, now); err != nil {
			t.Fatalf("StartRun = %v", err)
		}
		// One live run per thread, whatever the owner; another thread is free.
		if err := s.StartRun(ctx, run("x", "r2"), b, now); !errors.Is(err, runtimestore.ErrRunBusy) {
			t.Fatalf("second run in a busy thread = %v; want ErrRunBusy", err)
		}
		if err := s.StartRun(ctx, run("x", "r1"), b, now); !errors.Is(err, runtimestore.ErrRunBusy) {
			t.Fatalf("another owner taking a live run = %v; want ErrRunBusy", err)
		}
		if _, err := s.GetRun(ctx, "x", "r2"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("refused StartRun wrote the run: %v", err)
		}
		if err := s.StartRun(ctx, run("x", "r1"), a, now); err != nil {
			t.Fatalf("owner re-starting its run = %v", err)
		}
		if err := s.StartRun(ctx, run("nope", "r9"), a, now); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("StartRun on a missing thread = %v", err)
		}
		if err := s.StartRun(ctx, run("y", "r3"), b, now); err != nil {
			t.Fatal(err)
		}
		// Cancel from any replica: the flag reaches the owner's polls.
		if got, _ := s.CancelRequested(ctx, "replica-a"); len(got) != 0 {
			t.Fatalf("CancelRequested before any cancel = %v", got)
		}
		owner, ok, err := s.RequestCancel(ctx, "x", "r1")
		if err != nil || !ok || owner != "replica-a" {
			t.Fatalf("RequestCancel = %q, %v, %v", owner, ok, err)
		}
		if _, _, err := s.RequestCancel(ctx, "x", "zz"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("RequestCancel of a missing run = %v", err)
		}
		got, err := s.CancelRequested(ctx, "replica-a")
		if err != nil || len(got) != 1 || got[0] != (runtimestore.RunRef{ThreadID: "x", RunID: "r1"}) {
			t.Fatalf("CancelRequested(a) = %v, %v", got, err)
		}
		if got, _ := s.CancelRequested(ctx, "replica-b"); len(got) != 0 {
			t.Fatalf("CancelRequested(b) = %v; b's run was not cancelled", got)
		}
		renewed, err := s.RenewLeases(ctx, "replica-a", now.Add(time.Hour))
		if err != nil || len(renewed) != 1 || renewed[0].RunID != "r1" || !renewed[0].CancelRequested {
			t.Fatalf("RenewLeases(a) = %v, %v", renewed, err)
		}
		// PutRun keeps lease and flag; a finished run is no longer renewed
		// nor cancellable.
		fin := run("x", "r1")
		fin.Status = runtimev1.RunStatus_RUN_STATUS_CANCELLED
		if err := s.PutRun(ctx, fin); err != nil {
			t.Fatal(err)
		}
		if renewed, _ := s.RenewLeases(ctx, "replica-a", now.Add(time.Hour)); len(renewed) != 0 {
			t.Fatalf("a finished run renewed: %v", renewed)
		}
		if _, ok, _ := s.RequestCancel(ctx, "x", "r1"); ok {
			t.Fatal("RequestCancel flagged a finished run")
		}
		// A restarted run (ResumeRun) starts with a clear flag.
		if err := s.StartRun(ctx, run("x", "r1"), a, now); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.CancelRequested(ctx, "replica-a"); len(got) != 0 {
			t.Fatalf("cancel flag survived a restart of the run: %v", got)
		}
		// A legacy RUNNING row written by PutRun has no lease.
		if err := s.PutRun(ctx, run("y", "legacy")); err != nil {
			t.Fatal(err)
		}
		if f.Reopen != nil {
			s = f.Reopen(t, s)
		}
		// The sweep takes only expired leases: at now+10s both live runs
		// (leases to now+30s) stay and the legacy row goes.
		n, err := s.InterruptExpired(ctx, "the owning replica stopped", now.Add(10*time.Second))
		if err != nil || n != 1 {
			t.Fatalf("InterruptExpired before any lease ended = %d, %v; want 1 (the run without a lease)", n, err)
		}
		if _, err := s.RenewLeases(ctx, "replica-a", now.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		n, err = s.InterruptExpired(ctx, "the owning replica stopped", now.Add(time.Minute))
		if err != nil || n != 1 {
			t.Fatalf("InterruptExpired after b's lease ended = %d, %v; want 1", n, err)
		}
		r3, _ := s.GetRun(ctx, "y", "r3")
		if r3.GetStatus() != runtimev1.RunStatus_RUN_STATUS_INTERRUPTED || r3.GetReason() != "the owning replica stopped" || r3.GetEndTime() == nil {
			t.Fatalf("expired run = %v", r3)
		}
		r1, _ := s.GetRun(ctx, "x", "r1")
		if r1.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
			t.Fatalf("a renewed run was interrupted: %v", r1)
		}
		// Once b's run ended, the thread takes a new run from anyone.
		if err := s.StartRun(ctx, run("y", "r4"), runtimestore.Lease{Owner: "replica-a", Until: now.Add(2 * time.Minute)}, now.Add(time.Minute)); err != nil {
			t.Fatalf("StartRun after the previous run was interrupted = %v", err)
		}
		// A final write by a replica that does not execute the run loses
		// to a live lease (a peer resumed it) and wins otherwise.
		end := run("y", "r4")
		end.Status = runtimev1.RunStatus_RUN_STATUS_CANCELLED
		if ok, err := s.EndRunUnlessLeased(ctx, end, now.Add(time.Minute)); err != nil || ok {
			t.Fatalf("EndRunUnlessLeased over a live lease = %v, %v; want false", ok, err)
		}
		if r4, _ := s.GetRun(ctx, "y", "r4"); r4.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
			t.Fatalf("a refused end changed the run: %v", r4)
		}
		if ok, err := s.EndRunUnlessLeased(ctx, end, now.Add(time.Hour)); err != nil || !ok {
			t.Fatalf("EndRunUnlessLeased after the lease = %v, %v; want true", ok, err)
		}
		if r4, _ := s.GetRun(ctx, "y", "r4"); r4.GetStatus() != runtimev1.RunStatus_RUN_STATUS_CANCELLED {
			t.Fatalf("end not written: %v", r4)
		}
		// A run's last event number outlives every other write of the run.
		if seq, err := s.EventSeq(ctx, "y", "r4"); err != nil || seq != 0 {
			t.Fatalf("EventSeq before any = %d, %v; want 0", seq, err)
		}
		if err := s.SetEventSeq(ctx, "y", "r4", 7); err != nil {
			t.Fatal(err)
		}
		if err := s.StartRun(ctx, run("y", "r4"), runtimestore.Lease{Owner: "replica-b", Until: now.Add(2 * time.Hour)}, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRun(ctx, end); err != nil {
			t.Fatal(err)
		}
		if seq, err := s.EventSeq(ctx, "y", "r4"); err != nil || seq != 7 {
			t.Fatalf("EventSeq after StartRun and PutRun = %d, %v; want 7", seq, err)
		}
		if seq, _ := s.EventSeq(ctx, "x", "r1"); seq != 0 {
			t.Fatalf("another run's EventSeq = %d; want 0", seq)
		}
		if err := s.SetEventSeq(ctx, "y", "nope", 1); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("SetEventSeq of a missing run = %v", err)
		}
		if _, err := s.EventSeq(ctx, "x", "r4"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("EventSeq of a run of another thread = %v", err)
		}
		if _, err := s.EndRunUnlessLeased(ctx, run("y", "nope"), now); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("EndRunUnlessLeased of a missing run = %v", err)
		}
	})
	t.Run("ToolCallClaims", func(t *testing.T) {
		s := f.Open(t)
		now := time.Now()
		_ = s.CreateThread(ctx, newThread("x", "t", "u", now))
		l := runtimestore.Lease{Owner: "replica-a", Until: now.Add(time.Minute)}
		if _, _, err := s.ClaimToolCall(ctx, "nope", "c1", "fp", l); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("claim on a missing thread = %v", err)
		}
		claimed, _, err := s.ClaimToolCall(ctx, "x", "c1", "fp1", l)
		if err != nil || !claimed {
			t.Fatalf("first claim = %v, %v", claimed, err)
		}
		claimed, got, err := s.ClaimToolCall(ctx, "x", "c1", "other", runtimestore.Lease{Owner: "replica-b", Until: now.Add(time.Minute)})
		if err != nil || claimed || got.State != runtimestore.CallRunning || got.Fingerprint != "fp1" || got.Lease.Owner != "replica-a" {
			t.Fatalf("duplicate claim = %v, %+v, %v", claimed, got, err)
		}
		// The result lands with the state update, in one transaction.
		if _, err := s.UpdateThread(runtimestore.WithCallResult(ctx, runtimestore.CallResult{CallID: "c1", Result: []byte("result-1")}), "x",
			func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
				th.Proto.Promoted = &runtimev1.Promoted{CatalogHash: "h", Names: []string{"p"}}
				return nil, nil
			}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetToolCall(ctx, "x", "c1"); err != nil || got.State != runtimestore.CallDone || string(got.Result) != "result-1" {
			t.Fatalf("after the update: %+v, %v", got, err)
		}
		// A failed update records nothing.
		_, _, _ = s.ClaimToolCall(ctx, "x", "c2", "fp2", l)
		_, _ = s.UpdateThread(runtimestore.WithCallResult(ctx, runtimestore.CallResult{CallID: "c2", Result: []byte("lost")}), "x",
			func(*runtimestore.Thread) ([]*runtimev1.Message, error) { return nil, errors.New("boom") })
		if got, _ := s.GetToolCall(ctx, "x", "c2"); got.State != runtimestore.CallRunning || got.Result != nil {
			t.Fatalf("a rolled-back update recorded a result: %+v", got)
		}
		// Settling needs an expired lease; release needs the owner.
		if got, _ := s.SettleToolCall(ctx, "x", "c2", []byte("unknown"), now); got.State != runtimestore.CallRunning {
			t.Fatalf("settled a live claim: %+v", got)
		}
		if err := s.ReleaseToolCall(ctx, "x", "c2", "replica-b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetToolCall(ctx, "x", "c2"); err != nil {
			t.Fatalf("another owner released the claim: %v", err)
		}
		if got, _ := s.SettleToolCall(ctx, "x", "c2", []byte("unknown"), now.Add(2*time.Minute)); got.State != runtimestore.CallDone || string(got.Result) != "unknown" {
			t.Fatalf("expired claim not settled: %+v", got)
		}
		if got, _ := s.SettleToolCall(ctx, "x", "c1", []byte("unknown"), now.Add(2*time.Minute)); string(got.Result) != "result-1" {
			t.Fatalf("settle overwrote a stored result: %+v", got)
		}
		_, _, _ = s.ClaimToolCall(ctx, "x", "c3", "fp3", l)
		if err := s.ReleaseToolCall(ctx, "x", "c3", "replica-a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetToolCall(ctx, "x", "c3"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("released claim still there: %v", err)
		}
		if f.Reopen != nil {
			s = f.Reopen(t, s)
		}
		if got, err := s.GetToolCall(ctx, "x", "c1"); err != nil || string(got.Result) != "result-1" {
			t.Fatalf("after reopen: %+v, %v", got, err)
		}
		if n, err := s.PurgeToolCallsBefore(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
			t.Fatalf("purge of nothing old = %d, %v", n, err)
		}
		if n, err := s.PurgeToolCallsBefore(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
			t.Fatalf("purge = %d, %v; want 2", n, err)
		}
		// Deleting the thread deletes its claims.
		_, _, _ = s.ClaimToolCall(ctx, "x", "c4", "fp4", l)
		if err := s.DeleteThread(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		_ = s.CreateThread(ctx, newThread("x", "t", "u", now))
		if _, err := s.GetToolCall(ctx, "x", "c4"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("claim survived its thread: %v", err)
		}
	})
	t.Run("AgentsEventsPersistenceAndRetention", func(t *testing.T) {
		s := f.Open(t)
		if err := s.PutAgent(ctx, &runtimev1.Agent{Name: "b", Description: "B"}); err != nil {
			t.Fatal(err)
		}
		_ = s.PutAgent(ctx, &runtimev1.Agent{Name: "a", Description: "A"})
		_ = s.PutAgent(ctx, &runtimev1.Agent{Name: "b", Description: "B2"})
		old := time.Now().Add(-48 * time.Hour)
		_ = s.CreateThread(ctx, newThread("old", "t", "u", old))
		_ = s.CreateThread(ctx, newThread("new", "t", "u", time.Now()))
		if _, err := s.UpdateThread(ctx, "new", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
			th.ReadMarks["/mnt/user-data/workspace/a.txt"] = "abc"
			th.Proto.Promoted = &runtimev1.Promoted{CatalogHash: "h", Names: []string{"x"}}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvent(ctx, runtimestore.Event{ThreadID: "new", Kind: "authz.fail_open", Detail: "d"}); err != nil {
			t.Fatal(err)
		}
		if f.Reopen != nil {
			s = f.Reopen(t, s)
		}
		agents, err := s.ListAgents(ctx)
		if err != nil || len(agents) != 2 || agents[0].GetName() != "a" || agents[1].GetDescription() != "B2" {
			t.Fatalf("agents = %v, %v", agents, err)
		}
		if err := s.DeleteAgent(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetAgent(ctx, "a"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatalf("deleted agent: %v", err)
		}
		th, err := s.GetThread(ctx, "new")
		if err != nil {
			t.Fatal(err)
		}
		if th.ReadMarks["/mnt/user-data/workspace/a.txt"] != "abc" || fmt.Sprint(th.Proto.GetReadFiles()) != "[/mnt/user-data/workspace/a.txt]" || th.Proto.GetPromoted().GetNames()[0] != "x" {
			t.Fatalf("thread state not kept: %v %v", th.ReadMarks, th.Proto)
		}
		ev, err := s.ListEvents(ctx, "new")
		if err != nil || len(ev) != 1 || ev[0].Kind != "authz.fail_open" {
			t.Fatalf("events = %v, %v", ev, err)
		}
		// IdleThreads (front-door retention) sees the idle thread only,
		// paged by id.
		sc, ok := s.(runtimestore.IdleThreadScanner)
		if !ok {
			t.Fatalf("%T does not implement runtimestore.IdleThreadScanner", s)
		}
		_ = s.CreateThread(ctx, newThread("old2", "t2", "v", old))
		idle, err := sc.IdleThreads(ctx, time.Now().Add(-24*time.Hour), "", 1)
		if err != nil || len(idle) != 1 || idle[0].Proto.GetThreadId() != "old" {
			t.Fatalf("IdleThreads page 1 = %v, %v", idle, err)
		}
		idle, err = sc.IdleThreads(ctx, time.Now().Add(-24*time.Hour), "old", 10)
		if err != nil || len(idle) != 1 || idle[0].Proto.GetThreadId() != "old2" || idle[0].Proto.GetOwnerTenant() != "t2" {
			t.Fatalf("IdleThreads page 2 = %v, %v", idle, err)
		}
		if err := s.DeleteThread(ctx, "old2"); err != nil {
			t.Fatal(err)
		}
		ids, err := s.PurgeThreadsBefore(ctx, time.Now().Add(-24*time.Hour))
		if err != nil || fmt.Sprint(ids) != "[old]" {
			t.Fatalf("purge = %v, %v", ids, err)
		}
		if _, err := s.GetThread(ctx, "old"); !errors.Is(err, runtimestore.ErrNotFound) {
			t.Fatal("purged thread still there")
		}
	})
}
