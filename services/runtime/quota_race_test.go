package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// TestWorkspaceQuotaConcurrentWriters: many writers on one thread, each
// writing a new file that alone fits the quota, never leave the thread's
// files over runtime.limits.workspace.thread_quota_bytes (the check and the
// write are one reservation), and exactly as many succeed as fit.
func TestWorkspaceQuotaConcurrentWriters(t *testing.T) {
	cfg := Config{Limits: LimitsConfig{Workspace: WorkspaceLimits{FileMaxBytes: 8 << 10, ThreadQuotaBytes: 20 << 10}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, _, _ := fakeUpstreamServer(t, cfg)
	for round := range 10 { // a race shows in some rounds, not all
		quotaRound(t, s, round)
	}
}

func quotaRound(t *testing.T, s *Server, round int) {
	ctx := context.Background()
	th, err := s.CreateThread(ctx, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	const writers, size = 24, 6 << 10 // 3 fit in 20 KiB
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	start := make(chan struct{})
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _ := structpb.NewStruct(map[string]any{"path": fmt.Sprintf("/mnt/user-data/workspace/f%02d", i), "content": strings.Repeat("q", size)})
			<-start
			r, err := s.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: fmt.Sprintf("w%d", i), Name: "write_file", Arguments: a}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.GetResult().GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS:
				ok++
			case strings.Contains(text0(r.GetResult()), "runtime.limits.workspace.thread_quota_bytes"):
				refused++
			default:
				t.Errorf("write %d: %v", i, r.GetResult())
			}
		}()
	}
	close(start)
	wg.Wait()
	var used int64
	_ = filepath.WalkDir(filepath.Join(s.ws.ThreadDir(id), "user-data"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	if used > 20<<10 || ok != 3 || refused != writers-3 {
		t.Fatalf("round %d: used %d bytes of a %d quota; %d writes succeeded, %d refused (want 3, %d)", round, used, 20<<10, ok, refused, writers-3)
	}
}
