package runtimesqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/services/runtime/runtimesqlite"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

func TestSqliteConformance(t *testing.T) {
	open := func(path string, t *testing.T) runtimestore.Store {
		s, err := runtimesqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	paths := map[runtimestore.Store]string{}
	runtimetest.RunStoreSuite(t, runtimetest.Factory{
		Open: func(t *testing.T) runtimestore.Store {
			p := filepath.Join(t.TempDir(), "runtime.db")
			s := open(p, t)
			paths[s] = p
			return s
		},
		Reopen: func(t *testing.T, s runtimestore.Store) runtimestore.Store {
			p := paths[s]
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			n := open(p, t)
			paths[n] = p
			return n
		},
	})
}
