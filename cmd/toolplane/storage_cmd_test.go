package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/pgtest"
	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestStorageMigrate: the command copies a data directory into PostgreSQL
// and prints the counts; missing flags are usage errors (exit 2).
func TestStorageMigrate(t *testing.T) {
	t.Setenv("TOOLPLANE_STORAGE_DSN", "")
	var ee *exitError
	if _, err := runRoot(t, "storage", "migrate", "--to", "postgres://x@127.0.0.1/db"); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "--from") {
		t.Fatalf("without --from: %v", err)
	}
	dir := t.TempDir()
	if _, err := runRoot(t, "storage", "migrate", "--from", dir); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "--to") {
		t.Fatalf("without a DSN: %v", err)
	}
	s, err := runtimesqlite.Open(filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := timestamppb.Now()
	if err := s.CreateThread(context.Background(), &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1", CreateTime: now, UpdateTime: now}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv("TOOLPLANE_STORAGE_DSN", pgtest.DSN(t))
	out, err := runRoot(t, "storage", "migrate", "--from", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "runtime.threads") || !strings.Contains(out, "counts match") || !strings.Contains(strings.Join(strings.Fields(out), " "), "runtime.threads 1 1") {
		t.Fatalf("output:\n%s", out)
	}
	if _, err := runRoot(t, "storage", "migrate", "--from", dir); !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("second copy: %v", err)
	}
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
