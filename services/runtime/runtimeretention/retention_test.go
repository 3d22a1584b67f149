package runtimeretention

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// TestRetentionSweep: one retention pass on a fixed clock removes idle
// threads with their workspaces, finished old runs, whole old turns and
// old artifacts (file and entry, without touching the thread), and keeps
// everything recent; a zero period keeps that kind.
func TestRetentionSweep(t *testing.T) {
	st := runtimestore.NewMemory()
	ws := runtimetools.NewWorkspace(t.TempDir())
	sw := &Sweeper{Store: st, Workspace: ws, Log: slog.Default(), Now: time.Now}
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	day := 24 * time.Hour
	for id, at := range map[string]time.Time{"old": ago(10 * day), "live": ago(time.Hour)} {
		if err := st.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: id, CreateTime: timestamppb.New(at), UpdateTime: timestamppb.New(at),
			Artifacts: []*runtimev1.Artifact{{Path: "/mnt/user-data/outputs/old.txt"}, {Path: "/mnt/user-data/outputs/new.txt"}, {Path: "/mnt/user-data/outputs/missing.txt"}}}}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(ws.ThreadDir(id), "user-data", "outputs")
		if err := os.MkdirAll(out, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, mt := range map[string]time.Time{"old.txt": ago(3 * day), "new.txt": ago(time.Hour)} {
			if err := os.WriteFile(filepath.Join(out, name), []byte(name), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(out, name), mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	msg := func(id string, role runtimev1.MessageRole, at time.Time) *runtimev1.Message {
		return &runtimev1.Message{Id: id, Role: role, CreateTime: timestamppb.New(at)}
	}
	_ = st.AppendMessages(ctx, "live", msg("u1", runtimev1.MessageRole_MESSAGE_ROLE_USER, ago(3*day)), msg("a1", runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, ago(3*day)),
		msg("u2", runtimev1.MessageRole_MESSAGE_ROLE_USER, ago(time.Hour)), msg("a2", runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT, ago(time.Hour)))
	for id, at := range map[string]time.Time{"r-old": ago(3 * day), "r-new": ago(time.Hour)} {
		_ = st.PutRun(ctx, &runtimev1.Run{RunId: id, ThreadId: "live", Status: runtimev1.RunStatus_RUN_STATUS_COMPLETED, StartTime: timestamppb.New(at)})
	}
	state := func() string {
		var parts []string
		ths, _, _ := st.ListThreads(ctx, "", "", runtimestore.Page{Limit: 10})
		for _, th := range ths {
			parts = append(parts, "thread:"+th.Proto.GetThreadId())
		}
		if th, err := st.GetThread(ctx, "live"); err == nil {
			for _, a := range th.Proto.GetArtifacts() {
				parts = append(parts, "artifact:"+filepath.Base(a.GetPath()))
			}
			if !th.Proto.GetUpdateTime().AsTime().Equal(ago(time.Hour)) {
				parts = append(parts, "touched")
			}
		}
		ms, _, _ := st.ListMessages(ctx, "live", runtimestore.Page{Limit: 10})
		for _, m := range ms {
			parts = append(parts, "msg:"+m.GetId())
		}
		rs, _ := st.ListRuns(ctx, "live")
		for _, r := range rs {
			parts = append(parts, "run:"+r.GetRunId())
		}
		for _, id := range []string{"old", "live"} {
			for _, f := range []string{"old.txt", "new.txt"} {
				if _, err := os.Stat(filepath.Join(ws.ThreadDir(id), "user-data", "outputs", f)); err == nil {
					parts = append(parts, "file:"+id+"/"+f)
				}
			}
		}
		slices.Sort(parts)
		return strings.Join(parts, " ")
	}
	before := state()
	sw.Sweep(ctx, Periods{}, now)
	if got := state(); got != before {
		t.Fatalf("zero periods removed something:\n%s\n%s", before, got)
	}
	sw.Sweep(ctx, Periods{Threads: 7 * day, Runs: 2 * day, Messages: 2 * day, Artifacts: 2 * day}, now)
	want := "artifact:new.txt file:live/new.txt msg:a2 msg:u2 run:r-new thread:live"
	if got := state(); got != want {
		t.Fatalf("after the sweep:\n got %s\nwant %s", got, want)
	}
	if _, err := os.Stat(ws.ThreadDir("old")); !os.IsNotExist(err) {
		t.Fatalf("old workspace kept: %v", err)
	}
}

// TestFrontDoorRetention: front-door threads (metadata mcp_binding) idle
// longer than FrontDoorThreads go with their subagent threads and
// workspaces while runtime.retention.threads keeps every thread forever;
// recent front-door threads and old threads of other clients stay.
func TestFrontDoorRetention(t *testing.T) {
	st := runtimestore.NewMemory()
	ws := runtimetools.NewWorkspace(t.TempDir())
	sw := &Sweeper{Store: st, Workspace: ws, Log: slog.Default(), Now: time.Now}
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	mk := func(id string, idle time.Duration, md map[string]string, child *runtimestore.Child) {
		at := timestamppb.New(now.Add(-idle))
		if err := st.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: id, CreateTime: at, UpdateTime: at, Metadata: md}, Child: child}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(ws.ThreadDir(id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	session := map[string]string{FrontDoorMetadataKey: "session"}
	mk("fd-old", 25*time.Hour, session, nil)
	mk("fd-old-child", 25*time.Hour, nil, &runtimestore.Child{ParentThreadID: "fd-old"})
	mk("fd-stable-old", 48*time.Hour, map[string]string{FrontDoorMetadataKey: "stable"}, nil)
	mk("fd-new", time.Hour, session, nil)
	mk("api-old", 30*24*time.Hour, map[string]string{"k": "v"}, nil)
	sw.Sweep(ctx, Periods{FrontDoorThreads: 24 * time.Hour}, now)
	var left []string
	for _, id := range []string{"fd-old", "fd-old-child", "fd-stable-old", "fd-new", "api-old"} {
		_, err := st.GetThread(ctx, id)
		_, serr := os.Stat(ws.ThreadDir(id))
		if (err == nil) != (serr == nil) {
			t.Errorf("%s: thread present=%v, workspace present=%v", id, err == nil, serr == nil)
		}
		if err == nil {
			left = append(left, id)
		}
	}
	if !slices.Equal(left, []string{"fd-new", "api-old"}) {
		t.Fatalf("threads left = %v, want [fd-new api-old]", left)
	}
}
