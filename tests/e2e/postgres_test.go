//go:build e2e

package e2e

// The real binary on PostgreSQL (storage.dsn): configuration errors of the
// storage key, and state that lives in the database rather than the data
// directory, shared by two processes. The server is a throwaway cluster of
// internal/pgtest (stopped by TestMain).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/internal/testkit"
)

// TestStorageConfigErrors: a malformed DSN, an unreachable server and a
// failed migration each exit 2 before anything listens, with one stderr
// line naming storage.dsn and never the password.
func TestStorageConfigErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// A database whose runtime schema has a table in the way of migration 1.
	blocked := pgtest.Pool(t)
	if _, err := blocked.Exec(context.Background(), `CREATE SCHEMA runtime; CREATE TABLE runtime.threads (x int)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dsn string
		want      string
	}{
		{"malformed", "postgres://u:s3cretpw@127.0.0.1:5432/db?sslmode=bogus", "invalid DSN"},
		{"unreachable", fmt.Sprintf("postgres://u:s3cretpw@127.0.0.1:%d/db?sslmode=disable&connect_timeout=5", deadPort), "cannot connect to the server at 127.0.0.1"},
		{"failed migration", blocked.Config().ConnString(), "migrate runtime"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			httpAddr := testkit.FreeAddr(t)
			res := testkit.Run(t, []string{"TOOLPLANE_STORAGE_DSN=" + c.dsn},
				"serve", "--grpc-addr", testkit.FreeAddr(t), "--http-addr", httpAddr, "--data-dir", filepath.Join(t.TempDir(), "data"))
			lines := res.StderrLines()
			if res.Code != 2 || len(lines) != 1 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line", res.Code, res.Stderr)
			}
			if !strings.Contains(lines[0], "storage.dsn") || !strings.Contains(lines[0], c.want) || strings.Contains(lines[0], "s3cretpw") {
				t.Fatalf("stderr %q: want storage.dsn and %q, without the password", lines[0], c.want)
			}
		})
	}
}

func pgREST(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 15 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// TestTwoProcessesShareOneDatabase: two all-in-one processes with their own
// data directories start together on one database (migrating once); a
// thread created through one is listed by the other and survives both
// restarting; nothing but the runtime's workspaces is written in either
// data directory; the authz policy was seeded once and both report the
// same version.
func TestTwoProcessesShareOneDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := []string{"TOOLPLANE_STORAGE_DSN=" + dsn}
	a := testkit.Start(t, testkit.Options{Env: env, Wait: testkit.WaitNone})
	b := testkit.Start(t, testkit.Options{Env: env})
	a = waitReady(t, a)
	var resp struct {
		Thread struct {
			ThreadID string `json:"thread_id"`
		} `json:"thread"`
	}
	if code := pgREST(t, http.MethodPost, "http://"+a.HTTPAddr+"/v1/threads", map[string]any{}, &resp); code != http.StatusOK || resp.Thread.ThreadID == "" {
		t.Fatalf("CreateThread on A: %d %+v", code, resp)
	}
	created := resp.Thread
	listed := func(p *testkit.Process) bool {
		var list struct {
			Threads []struct {
				ThreadID string `json:"thread_id"`
			} `json:"threads"`
		}
		if code := pgREST(t, http.MethodGet, "http://"+p.HTTPAddr+"/v1/threads", nil, &list); code != http.StatusOK {
			t.Fatalf("ListThreads: %d", code)
		}
		for _, th := range list.Threads {
			if th.ThreadID == created.ThreadID {
				return true
			}
		}
		return false
	}
	if !listed(b) {
		t.Fatalf("thread %s created on A is not listed by B", created.ThreadID)
	}
	version := func(p *testkit.Process) int64 {
		var pol struct {
			PolicyVersion string `json:"policy_version"`
		}
		if code := pgREST(t, http.MethodGet, "http://"+p.HTTPAddr+"/v1/policies", nil, &pol); code != http.StatusOK {
			t.Fatalf("ListPolicies: %d", code)
		}
		var v int64
		fmt.Sscan(pol.PolicyVersion, &v)
		return v
	}
	if va, vb := version(a), version(b); va != 1 || vb != 1 {
		t.Fatalf("policy versions %d and %d; want 1 on both (seeded once)", va, vb)
	}
	for _, p := range []*testkit.Process{a, b} {
		if code := p.Stop(t); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.Stderr())
		}
		// The data directory holds only the runtime's thread workspaces, so
		// replicas can share it as one volume.
		ents, err := os.ReadDir(p.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "runtime" {
				t.Fatalf("%s written in the data directory although storage.dsn is set", e.Name())
			}
		}
	}
	c := testkit.Start(t, testkit.Options{Env: env})
	if !listed(c) {
		t.Fatalf("thread %s lost across restarts", created.ThreadID)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM runtime.threads WHERE id = $1`, created.ThreadID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("thread row in runtime.threads: %d %v", n, err)
	}
}

// waitServing waits until p answers /readyz (it was started without
// waiting, so that two processes start together).
func waitReady(t *testing.T, p *testkit.Process) *testkit.Process {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + p.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if code, done := p.Exited(); done {
			t.Fatalf("process exited %d: %s", code, p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("process not ready in 60s: %s", p.Stderr())
	return nil
}
