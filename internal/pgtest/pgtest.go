// Package pgtest runs store tests against a real, throwaway PostgreSQL
// cluster: the first test of a package that asks for a database starts one
// cluster (initdb + postgres from the Debian `postgresql` package, found by
// globbing /usr/lib/postgresql/*/bin, since Debian keeps initdb off PATH) on
// a free 127.0.0.1 port in a temporary directory; every test gets a fresh
// database in it, dropped when the test ends; Main stops the cluster and
// removes its directory after the package's tests.
//
// Tests and CI run as root and initdb refuses root: as root, the cluster
// runs as the package's `postgres` system user (initdb through
// `runuser -u postgres --`, the server with that user's credentials) in a
// directory that user owns. The server gets the parent-death signal, so a
// test binary killed by a timeout does not leave it running.
//
// When PostgreSQL is not installed the test fails under CI=true (.ci/run
// installs it) and is skipped elsewhere, with the reason.
//
// Usage, once per package:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and in a test: dsn := pgtest.DSN(t) or pool := pgtest.Pool(t).
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BinGlob is where the Debian package keeps the server binaries.
const BinGlob = "/usr/lib/postgresql/*/bin"

type cluster struct {
	dir     string // temp dir owned by the server's user: data/, socket, log
	bin     string // the server binaries
	as      *runAs // the account the server runs under (nil = this user)
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	admin   *pgxpool.Pool
	missing string // why PostgreSQL is unavailable ("" = available)
	err     error  // a start failure of an installed PostgreSQL
}

var (
	once    sync.Once
	shared  *cluster
	counter atomic.Int64
)

// Main runs the package's tests, then stops the cluster if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the cluster (fast shutdown, then SIGKILL after 10 s) and
// removes its directory. Main calls it; it is idempotent.
func Stop() {
	c := shared
	if c == nil {
		return
	}
	shared = nil
	if c.admin != nil {
		c.admin.Close()
	}
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// unavailable fails t under CI=true and skips it elsewhere.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: "+format, args...)
	}
	t.Skipf("pgtest: "+format, args...)
}

func get(t testing.TB) *cluster {
	t.Helper()
	once.Do(func() { shared = start() })
	c := shared
	if c == nil {
		t.Fatal("pgtest: cluster already stopped (Stop called before the test)")
	}
	if c.missing != "" {
		unavailable(t, "%s", c.missing)
	}
	if c.err != nil {
		t.Fatalf("pgtest: starting PostgreSQL: %v", c.err)
	}
	return c
}

// BinDir returns the newest /usr/lib/postgresql/<major>/bin holding initdb
// and postgres, or the directory of initdb on PATH; "" when there is none.
func BinDir() string {
	dirs, _ := filepath.Glob(BinGlob)
	major := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && isExec(filepath.Join(filepath.Dir(p), "postgres")) {
		return filepath.Dir(p)
	}
	return ""
}

// traversable reports whether every directory from / down to dir may be
// searched by other users (mode o+x), so that a server running as another
// user reaches a directory made in dir.
func traversable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// runAs is the account the cluster runs under: nil = the current user.
type runAs struct {
	uid, gid uint32
}

func start() *cluster {
	c := &cluster{}
	bin := BinDir()
	if bin == "" {
		c.missing = "PostgreSQL is not installed (no initdb under " + BinGlob + " or on PATH; Debian package `postgresql`)"
		return c
	}
	var as *runAs
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			c.missing = "running as root and there is no `postgres` system user to run the cluster as (initdb refuses root)"
			return c
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		as = &runAs{uid: uint32(uid), gid: uint32(gid)}
		if _, err := exec.LookPath("runuser"); err != nil {
			c.missing = "running as root and runuser (util-linux) is not on PATH"
			return c
		}
	}
	base := ""
	if as != nil && !traversable(os.TempDir()) {
		base = "/tmp" // e.g. TMPDIR under root's 0700 home: the postgres user could not reach it
	}
	dir, err := os.MkdirTemp(base, "toolplane-pg-")
	if err != nil {
		c.err = err
		return c
	}
	c.dir = dir
	if as != nil {
		if err := os.Chown(dir, int(as.uid), int(as.gid)); err != nil {
			c.err = err
			return c
		}
	}
	data := filepath.Join(dir, "data")
	initdb := []string{filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"}
	var cmd *exec.Cmd
	if as != nil {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, initdb...)...)
	} else {
		cmd = exec.Command(initdb[0], initdb[1:]...)
	}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		c.err = fmt.Errorf("initdb: %v\n%s", err, out)
		return c
	}
	c.bin, c.as = bin, as
	for attempt := 0; attempt < 3; attempt++ {
		if c.err = c.serve(0); c.err == nil {
			return c
		}
	}
	return c
}

// serve starts the server on port (0 = a free one) and waits until it
// accepts connections; it returns an error (after stopping the process)
// when the server exits or does not answer within 30 s.
func (c *cluster) serve(port int) error {
	bin, data, as := c.bin, filepath.Join(c.dir, "data"), c.as
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	c.port = port
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(c.port),
		"-c", "unix_socket_directories="+c.dir,
		// A throwaway cluster: no fsync (safety against an OS crash only);
		// synchronous_commit stays on, so a commit acknowledged to a client
		// survives the server being killed, as in production.
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=16MB")
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if as != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		pool, err := pgxpool.New(ctx, c.dsn("postgres"))
		if err == nil {
			err = pool.Ping(ctx)
		}
		cancel()
		if err == nil {
			if c.admin != nil {
				c.admin.Close()
			}
			c.cmd, c.exited, c.admin = cmd, exited, pool
			return nil
		}
		if pool != nil {
			pool.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited at start:\n%s", tail(filepath.Join(c.dir, "server.log")))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("postgres did not answer within 30s: %v\n%s", err, tail(filepath.Join(c.dir, "server.log")))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (c *cluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// DSN creates a fresh, empty database for t and returns its connection
// string; the database is dropped (with any session still in it) when t
// ends.
func DSN(t testing.TB) string {
	t.Helper()
	c := get(t)
	name := fmt.Sprintf("t%d_%s", counter.Add(1), unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "_"))
	if len(name) > 63 {
		name = name[:63]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE template0 STRATEGY file_copy`); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if shared != c {
			return // the cluster is gone already
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.dsn(name)
}

// Pool returns a pool on a fresh database for t (see DSN), closed when t
// ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Admin returns a DSN of the cluster's `postgres` database (superuser), for
// tests that create roles or break things on purpose.
func Admin(t testing.TB) string {
	t.Helper()
	return get(t).dsn("postgres")
}

// Port returns the cluster's port.
func Port(t testing.TB) int {
	t.Helper()
	return get(t).port
}

// Crash kills the server and all its processes with SIGKILL (no shutdown:
// what is not on the WAL is lost, as in a crash of the server host's
// PostgreSQL), then starts it again on the same port and data, which runs
// crash recovery, and waits until it answers. Pools reconnect on their
// next use. Tests of durability against a server crash use it; the
// package's other tests keep their databases.
func Crash(t testing.TB) {
	t.Helper()
	c := get(t)
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("pgtest: kill the server: %v", err)
	}
	<-c.exited
	// Backends of the process group may take a moment to be reaped.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-c.cmd.Process.Pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = c.serve(c.port); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // the old shared memory or port may still be held
	}
	t.Fatalf("pgtest: restart after the crash: %v", err)
}
