package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

// vectorCache is a persistent tool-vector cache that can count its rows.
type vectorCache interface {
	search.VectorCache
	Count(ctx context.Context) (int, error)
}

// openStore opens the catalog's store: the catalog schema of env.Postgres
// (catalogpg) when storage.dsn is set, else DataDir/catalog.db (sqlite).
// Both hold the identity tables (docs/decisions/0100-0102) and the vector
// cache of the remote embedder.
func (s *Server) openStore(ctx context.Context) error {
	if s.env.Postgres != nil {
		st, err := catalogpg.Open(ctx, s.env.Postgres)
		if err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		s.store, s.storeClose = st, st.Close
		s.vectors = func(model string) vectorCache { return st.Vectors(model) }
		s.db = &dbState{db: st}
		return nil
	}
	if s.env.DataDir == "" {
		return errors.New("catalog: a data directory is required (names, pins, the applied configuration and cached vectors are kept in DataDir/catalog.db)")
	}
	if err := os.MkdirAll(s.env.DataDir, 0o700); err != nil {
		return fmt.Errorf("catalog: data directory: %w", err)
	}
	st, err := catalogstore.Open(filepath.Join(s.env.DataDir, "catalog.db"))
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	s.store, s.storeClose = st, st.Close
	s.vectors = func(model string) vectorCache { return st.Vectors(model) }
	return nil
}
