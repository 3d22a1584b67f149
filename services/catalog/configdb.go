package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogpg"
)

// On PostgreSQL (storage.dsn set) the database is the source of truth of
// the server configuration (docs/decisions/0087-catalog-config-in-postgresql.md):
//
//   - ReplaceServers and UpdateServer (global and tenant admins) edit the
//     rows in one transaction that bumps the version and notifies
//     catalogpg.ConfigChannel; the extensions file is not written.
//   - The replica holding the advisory lock catalog.file_import imports the
//     extensions file: a changed content (debounced, content-addressed; a
//     missing, empty, `{}` or `"mcpServers": null` file is not imported)
//     overrides the servers whose entries changed in it since the content
//     imported last. When that replica dies its session ends, the lock is
//     released and the next replica to try takes it over.
//   - Every replica applies the stored configuration when told through
//     LISTEN/NOTIFY and, as the fallback, when the version it reads every
//     catalog.reload_interval differs from the one it applied.
//
// On sqlite (the all-in-one default) the file stays the source: none of
// this runs.

// configDB is the PostgreSQL store of the server configuration.
type configDB interface {
	ConfigVersion(ctx context.Context) (int64, error)
	LoadServers(ctx context.Context) (*catalogpg.ServerConfig, error)
	EditServers(ctx context.Context, fn func(c *catalogpg.ServerConfig) error) (*catalogpg.ServerConfig, error)
	ListenConfig(ctx context.Context, fn func(version int64), onErr func(error))
	NewFileImportLock() *pgstore.SessionLock
}

// dbTimeout bounds one configuration read or write of the database;
// tickTimeout one tick of the reload loop (it holds writeMu).
const (
	dbTimeout   = 10 * time.Second
	tickTimeout = 3 * time.Second
)

// dbState is the database side of the server configuration (nil fields on
// sqlite). Fields other than lock and kick are guarded by Server.writeMu.
type dbState struct {
	db   configDB
	lock *pgstore.SessionLock
	kick chan struct{} // a notification asks for a version check
	// importer: this replica holds catalog.file_import.
	importer bool
	// version is the stored version applied last.
	version int64
	// fileImported is the SHA-256 of the file content imported last (as
	// stored); fileSeen and fileCandidate debounce the file as the sqlite
	// path does with Server.seen and Server.candidate.
	fileImported, fileSeen, fileCandidate [32]byte
	// failing: the last version check failed (logged once).
	failing bool
	cancel  context.CancelFunc
}

// storedDoc builds the configuration content of the stored rows (content
// addressed: the same rows give the same bytes on every replica).
func storedDoc(c *catalogpg.ServerConfig) []byte {
	names := make([]string, len(c.Servers))
	entries := make([][]byte, len(c.Servers))
	for i, r := range c.Servers {
		names[i], entries[i] = r.Name, r.Entry
	}
	return catalogconfig.Document(names, entries)
}

// fileSum decodes a stored hex SHA-256 ("" or malformed: zero).
func fileSum(h string) [32]byte {
	var out [32]byte
	if b, err := hex.DecodeString(h); err == nil && len(b) == 32 {
		copy(out[:], b)
	}
	return out
}

// initialConfigDB is initialConfig on PostgreSQL: the replica that gets
// catalog.file_import imports the file (a file that does not parse fails
// its start, as on sqlite), then every replica starts with the stored
// configuration.
func (s *Server) initialConfigDB(ctx context.Context) (*catalogconfig.File, []byte, error) {
	d := s.db
	d.lock = d.db.NewFileImportLock()
	lctx, cancel := context.WithTimeout(ctx, dbTimeout)
	ok, err := d.lock.TryLock(lctx)
	cancel()
	if err != nil {
		s.log.Warn("catalog: taking the file import lock failed; following the database", "lock", catalogpg.FileImportLock, "err", err)
	}
	if ok {
		d.importer = true
		s.log.Info("catalog: this replica imports extensions_config into the database", "path", s.path, "lock", catalogpg.FileImportLock)
		if _, err := s.importFileLocked(ctx, false, true); err != nil {
			d.lock.Release()
			return nil, nil, err
		}
		// Applied below with the rest of the stored configuration.
	}
	rctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	c, err := d.db.LoadServers(rctx)
	if err != nil {
		d.lock.Release()
		return nil, nil, err
	}
	raw := storedDoc(c)
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		d.lock.Release()
		return nil, nil, fmt.Errorf("the stored server configuration does not parse: %w", err)
	}
	d.version = c.Version
	d.fileImported = fileSum(c.FileSHA256)
	return f, raw, nil
}

// listenOff turns the LISTEN connection off (tests of the version check
// alone).
var listenOff atomic.Bool

// startDB starts following the database: the LISTEN connection.
func (s *Server) startDB() {
	d := s.db
	d.kick = make(chan struct{}, 1)
	if listenOff.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		d.db.ListenConfig(ctx, func(int64) {
			select {
			case d.kick <- struct{}{}:
			default: // a check is pending: it reads the newest version
			}
		}, func(err error) {
			s.log.Warn("catalog: configuration listener disconnected; reconnecting (the version check every catalog.reload_interval stays on)", "err", err)
		})
	}()
}

// stopDB ends the listener (before the loops are waited for).
func (s *Server) stopDB() {
	if s.db != nil && s.db.cancel != nil {
		s.db.cancel()
	}
}

// releaseDB gives the file import lock up, once no loop can take it
// again (closeStore: after the reload loop ended, or on a failed start),
// so another replica takes the import over at its next tick.
func (s *Server) releaseDB() {
	if s.db != nil && s.db.lock != nil {
		s.db.lock.Release()
	}
}

// tickDB is one tick of the reload loop on PostgreSQL: keep or take the
// import role, import a changed file when importing, and check the
// version.
func (s *Server) tickDB() {
	d := s.db
	ctx, cancel := context.WithTimeout(context.Background(), tickTimeout)
	defer cancel()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if d.importer {
		if held, err := d.lock.Held(ctx); !held {
			d.importer = false
			s.log.Warn("catalog: lost the file import lock; following the database", "lock", catalogpg.FileImportLock, "err", err)
		}
	} else if ok, err := d.lock.TryLock(ctx); err == nil && ok {
		d.importer = true
		d.fileSeen, d.fileCandidate = [32]byte{}, [32]byte{}
		if c, err := d.db.LoadServers(ctx); err == nil {
			d.fileImported = fileSum(c.FileSHA256)
		}
		s.log.Info("catalog: took the file import over; this replica imports extensions_config into the database", "path", s.path, "lock", catalogpg.FileImportLock)
	}
	if d.importer {
		c, err := s.importFileLocked(ctx, false, false)
		if err != nil {
			s.log.Warn("catalog: extensions_config import failed; keeping the stored configuration", "path", s.path, "err", err)
		} else if c != nil {
			if _, _, err := s.applyDBLocked(c); err != nil {
				s.log.Warn("catalog: applying the imported configuration failed", "err", err)
			}
		}
	}
	s.syncLogged(ctx)
}

// syncLogged runs syncDBLocked, logging a failure once per outage (a tick
// every reload_interval would flood the log).
func (s *Server) syncLogged(ctx context.Context) {
	err := s.syncDBLocked(ctx, false)
	switch {
	case err != nil && !s.db.failing:
		s.db.failing = true
		s.log.Warn("catalog: reading the server configuration from the database failed; keeping the last one", "err", err)
	case err == nil && s.db.failing:
		s.db.failing = false
		s.log.Info("catalog: reading the server configuration from the database works again")
	}
}

// notifiedDB applies the stored configuration after a notification.
func (s *Server) notifiedDB() {
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.syncLogged(ctx)
}

// syncDBLocked applies the stored configuration when its version differs
// from the one applied (or always when force), and its content from the
// running one.
func (s *Server) syncDBLocked(ctx context.Context, force bool) error {
	d := s.db
	if !force {
		v, err := d.db.ConfigVersion(ctx)
		if err != nil {
			return err
		}
		if v == d.version {
			return nil
		}
	}
	c, err := d.db.LoadServers(ctx)
	if err != nil {
		return err
	}
	_, _, err = s.applyDBLocked(c)
	return err
}

// applyDBLocked applies a configuration read from (or just written to)
// the database.
func (s *Server) applyDBLocked(c *catalogpg.ServerConfig) (restarted, unchanged []string, err error) {
	d := s.db
	if c.Version < d.version {
		return nil, nil, nil // an older read than the one applied
	}
	d.version = c.Version
	if d.importer {
		d.fileImported = fileSum(c.FileSHA256)
	}
	raw := storedDoc(c)
	if sha256.Sum256(raw) == s.applied {
		for _, srv := range c.Servers {
			unchanged = append(unchanged, srv.Name)
		}
		return nil, unchanged, nil
	}
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the stored server configuration does not parse: %w", err)
	}
	r, u := s.applyLocked(f, raw)
	return r, u, nil
}

// importFileLocked imports the extensions file when its content changed
// (debounced unless now or force) and declares servers. force (ReloadServers) re-applies
// every entry of the file, also unchanged ones, and drops the file's
// servers it no longer lists. It returns the stored configuration when it
// changed (nil when not); the caller applies it.
func (s *Server) importFileLocked(ctx context.Context, force, now bool) (*catalogpg.ServerConfig, error) {
	d := s.db
	raw, missing, err := s.readFile()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	if sum == d.fileImported && !force {
		d.fileSeen, d.fileCandidate = sum, sum
		return nil, nil
	}
	if !now && !force && sum != d.fileCandidate {
		d.fileCandidate = sum // may still be being written
		return nil, nil
	}
	first := sum != d.fileSeen
	d.fileSeen, d.fileCandidate = sum, sum
	if reason := undeclared(raw, missing); reason != "" {
		if first || force {
			s.log.Warn("catalog: extensions_config declares no servers; keeping the stored configuration (write {\"mcpServers\": {}} to remove the file's servers)",
				"path", s.path, "content", reason)
		}
		if force {
			return nil, fmt.Errorf("%s is %s; keeping the stored configuration (write {\"mcpServers\": {}} to remove the file's servers)", s.path, reason)
		}
		return nil, nil
	}
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		if !first && !force && !now {
			return nil, nil // reported once per content
		}
		return nil, err
	}
	if first || force {
		s.logWarnings(f)
	}
	entries := make(map[string][]byte, len(f.Servers))
	for i := range f.Servers {
		b, err := f.Servers[i].MarshalEntry()
		if err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %w", f.Servers[i].Name, err)
		}
		entries[f.Servers[i].Name] = b
	}
	hexSum := hex.EncodeToString(sum[:])
	c, err := d.db.EditServers(ctx, func(c *catalogpg.ServerConfig) error {
		if c.FileSHA256 == hexSum && !force {
			return catalogpg.ErrNoChange
		}
		prev := map[string][]byte{}
		if !force && len(bytes.TrimSpace(c.FileContent)) > 0 {
			if pf, err := catalogconfig.Parse(c.FileContent); err == nil {
				for i := range pf.Servers {
					if b, err := pf.Servers[i].MarshalEntry(); err == nil {
						prev[pf.Servers[i].Name] = b
					}
				}
			}
		}
		c.Servers = mergeFile(c.Servers, f.Servers, entries, prev, force)
		c.FileSHA256, c.FileContent = hexSum, raw
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.fileImported = sum
	if c.Version == d.version {
		return nil, nil // ErrNoChange: imported already
	}
	return c, nil
}

// mergeFile is the stored list after importing a file (servers in file
// order, entries their MarshalEntry text) over cur, given the entries of
// the content imported before (prev): a server whose entry is new or
// changed in the file is written as the file has it (in place, or
// appended); a server the file no longer lists is removed when the file
// wrote it last; every other row, an API write included, is kept. With
// force every entry of the file is written and every file row the file
// does not list is removed.
func mergeFile(cur []catalogpg.ServerRow, file []catalogconfig.Server, entries, prev map[string][]byte, force bool) []catalogpg.ServerRow {
	inFile := make(map[string]bool, len(file))
	for i := range file {
		inFile[file[i].Name] = true
	}
	at := map[string]int{}
	out := make([]catalogpg.ServerRow, 0, len(cur)+len(file))
	for _, r := range cur {
		if !inFile[r.Name] && r.Origin == catalogpg.OriginFile {
			if _, was := prev[r.Name]; was || force {
				continue // removed from the file
			}
		}
		at[r.Name] = len(out)
		out = append(out, r)
	}
	for i := range file {
		name := file[i].Name
		e := entries[name]
		if p, ok := prev[name]; ok && bytes.Equal(p, e) && !force {
			continue // unchanged in the file: what the API wrote since stays
		}
		row := catalogpg.ServerRow{Name: name, Origin: catalogpg.OriginFile, Entry: e}
		if j, ok := at[name]; ok {
			out[j] = row
		} else {
			at[name] = len(out)
			out = append(out, row)
		}
	}
	return out
}

// editServers runs an API write of the server list: edit changes f (its
// error, a gRPC status, is returned as is); on sqlite the file is written
// atomically and applied, on PostgreSQL the rows in one transaction that
// commits only over the rows the edit read (writers on every replica
// serialised, none lost) and applied here at once, the other replicas
// following through NOTIFY.
func (s *Server) editServers(ctx context.Context, edit func(f *catalogconfig.File) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.db == nil {
		f, err := s.loadLocked()
		if err != nil {
			return configUnavailable(codes.FailedPrecondition, err)
		}
		if err := edit(f); err != nil {
			return err
		}
		if err := s.writeFileLocked(f); err != nil {
			return configUnavailable(codes.Internal, err)
		}
		return nil
	}
	// The edit (validation, the egress check's DNS lookups) runs on a read
	// of the rows outside the transaction; the write then commits only if
	// no other writer committed since that read (the version under the
	// row lock), else the edit runs again on the newer rows.
	unavailable := func(err error) error {
		code := codes.Unavailable
		if errors.Is(err, context.Canceled) {
			code = codes.Canceled
		}
		return configUnavailable(code, err)
	}
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, dbTimeout)
		cur, err := s.db.db.LoadServers(rctx)
		cancel()
		if err != nil {
			return unavailable(err)
		}
		f, err := catalogconfig.Parse(storedDoc(cur))
		if err != nil {
			return configUnavailable(codes.Internal, fmt.Errorf("the stored server configuration does not parse: %w", err))
		}
		if err := edit(f); err != nil {
			return err
		}
		rows, err := editedRows(f, cur.Servers)
		if err != nil {
			return configUnavailable(codes.Internal, err)
		}
		wctx, cancel := context.WithTimeout(ctx, dbTimeout)
		c, err := s.db.db.EditServers(wctx, func(c *catalogpg.ServerConfig) error {
			if c.Version != cur.Version {
				return errStale
			}
			c.Servers = rows
			return nil
		})
		cancel()
		if errors.Is(err, errStale) && attempt < maxEditAttempts {
			continue
		}
		if errors.Is(err, errStale) {
			return configUnavailable(codes.Aborted, fmt.Errorf("the server configuration changed during %d attempts of this write", maxEditAttempts+1))
		}
		if err != nil {
			return unavailable(err)
		}
		if _, _, err := s.applyDBLocked(c); err != nil {
			return configUnavailable(codes.Internal, err)
		}
		return nil
	}
}

// errStale: another writer committed between the read and the write of
// an API edit (editServers runs the edit again).
var errStale = errors.New("catalog: the stored server configuration changed meanwhile")

// maxEditAttempts bounds the re-runs of one API edit.
const maxEditAttempts = 8

// editedRows is the stored list after an API edit f of the rows stored: a
// row the edit did not change keeps its origin, a changed or new one is
// the API's.
func editedRows(f *catalogconfig.File, stored []catalogpg.ServerRow) ([]catalogpg.ServerRow, error) {
	byName := make(map[string]catalogpg.ServerRow, len(stored))
	for _, r := range stored {
		byName[r.Name] = r
	}
	rows := make([]catalogpg.ServerRow, 0, len(f.Servers))
	for i := range f.Servers {
		e, err := f.Servers[i].MarshalEntry()
		if err != nil {
			return nil, fmt.Errorf("mcpServers.%s: %w", f.Servers[i].Name, err)
		}
		origin := catalogpg.OriginAPI
		if p, ok := byName[f.Servers[i].Name]; ok && bytes.Equal(p.Entry, e) {
			origin = p.Origin // not changed by this write
		}
		rows = append(rows, catalogpg.ServerRow{Name: f.Servers[i].Name, Origin: origin, Entry: e})
	}
	return rows, nil
}

// reloadDB is ReloadServers on PostgreSQL: the importing replica imports
// the file at once (every entry of it, force), every replica then applies
// the stored configuration.
func (s *Server) reloadDB(ctx context.Context) (restarted, unchanged []string, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	if s.db.importer {
		if held, _ := s.db.lock.Held(dctx); !held {
			s.db.importer = false
			s.log.Warn("catalog: lost the file import lock; following the database", "lock", catalogpg.FileImportLock)
		}
	}
	if s.db.importer {
		if _, err := s.importFileLocked(dctx, true, true); err != nil {
			return nil, nil, err
		}
	}
	c, err := s.db.db.LoadServers(dctx)
	if err != nil {
		return nil, nil, err
	}
	return s.applyDBLocked(c)
}
