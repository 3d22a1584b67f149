package authzsqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// TestMain doubles as the crash helper: with TP_AUTHZ_CRASH_DB set, the test
// binary appends denies through the group-commit log from 8 goroutines and
// prints each id once Append(wait=true) returned, until it is killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("TP_AUTHZ_CRASH_DB"); path != "" {
		crashHelper(path)
		return
	}
	os.Exit(m.Run())
}

func crashHelper(path string) {
	s, err := Open(path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	log := authzstore.NewLog(s, 64)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("c-%d-%d", g, i)
				rec := &authzstore.DecisionRecord{ID: id, Kind: authzstore.KindAuthorize, Time: time.Now(), Tenant: "t", Subject: "s", Resource: "tool", Action: "call", Target: "x"}
				if err := log.Append(context.Background(), rec, true); err != nil {
					return
				}
				mu.Lock()
				fmt.Fprintln(out, id)
				out.Flush()
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

// TestDenyDurableAcrossKill9: every decision acknowledged by the log (the
// point where Authorize answers a deny) is in the store after the process is
// killed with SIGKILL.
func TestDenyDurableAcrossKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TP_AUTHZ_CRASH_DB="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ERR") {
			t.Fatal(line)
		}
		acked[line] = true
		if len(acked) == 300 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	for sc.Scan() { // lines printed before the kill landed
		acked[sc.Text()] = true
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("helper acknowledged only %d records", len(acked))
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.DB().Query(`SELECT id FROM decisions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		stored[id] = true
	}
	for id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged decision %s lost after kill -9 (%d acknowledged, %d stored)", id, len(acked), len(stored))
		}
	}
	t.Logf("%d acknowledged, %d stored after SIGKILL", len(acked), len(stored))
}
