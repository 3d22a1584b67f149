package runtimesqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

func TestMain(m *testing.M) {
	if p := os.Getenv("TP_RUNTIME_CRASH_WRITER"); p != "" {
		crashWriter(p)
		return
	}
	os.Exit(m.Run())
}

// crashWriter promotes one name per committed transaction and prints the
// count after each commit, until it is killed.
func crashWriter(path string) {
	s, err := runtimesqlite.Open(path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	now := timestamppb.Now()
	_ = s.CreateThread(ctx, &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", CreateTime: now, UpdateTime: now}, ReadMarks: map[string]string{}})
	for i := 1; ; i++ {
		if _, err := s.UpdateThread(ctx, "t", func(th *runtimestore.Thread) ([]*runtimev1.Message, error) {
			th.Proto.Promoted = runtimestore.MergePromoted(th.Proto.Promoted, &runtimev1.Promoted{CatalogHash: "h", Names: []string{fmt.Sprintf("n%06d", i)}})
			return []*runtimev1.Message{{Content: strconv.Itoa(i)}}, nil
		}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}

// TestCommittedWritesSurviveKill9: every update reported as committed
// before a SIGKILL is in the store afterwards, with its message.
func TestCommittedWritesSurviveKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runtime.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TP_RUNTIME_CRASH_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	last := 0
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("writer: %s", sc.Text())
		}
		last = n
		if n >= 200 || time.Now().After(deadline) {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if last == 0 {
		t.Fatal("writer committed nothing")
	}
	s, err := runtimesqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := s.GetThread(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	got := len(th.Proto.GetPromoted().GetNames())
	msgs, _, err := s.ListMessages(context.Background(), "t", runtimestore.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if got < last || len(msgs) != got {
		t.Fatalf("after kill -9: %d promotions and %d messages, %d were reported committed", got, len(msgs), last)
	}
}
