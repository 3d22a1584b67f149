package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Safe reloads (docs/architecture.md §10.2, docs/decisions/0102): an
// editor's truncate-then-write save shows an empty file for an instant, and
// a deleted or half-written file must not stop every MCP child. Only a file
// that declares `mcpServers` (an object, possibly `{}`) is applied; the last
// applied content is kept in DataDir/catalog.db so it also holds at the
// first start after a bad edit.

// maxConfigBytes bounds extensions_config.json (a larger file is an error,
// not read into memory).
const maxConfigBytes = 16 << 20

// readFile reads the extensions file; missing reports that it does not exist.
func (s *Server) readFile() (raw []byte, missing bool, err error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if fi.Size() > maxConfigBytes {
		return nil, false, errors.New("file larger than 16 MiB")
	}
	raw, err = os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true, nil
	}
	return raw, false, err
}

// undeclared says why a content declares no server list ("" when it does):
// "missing", "empty", "an object without mcpServers" (`{}`), or
// "mcpServers: null". A content that is not a JSON object is not
// undeclared: Parse reports its error.
func undeclared(raw []byte, missing bool) string {
	if missing {
		return "missing"
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(t, &top) != nil || top == nil {
		return ""
	}
	v, ok := top["mcpServers"]
	if !ok {
		return "an object without mcpServers"
	}
	if string(bytes.TrimSpace(v)) == "null" {
		return "mcpServers: null"
	}
	return ""
}

// initialConfig returns the configuration to start with: the file, or the
// last applied configuration when the file declares no servers (logged,
// naming the file). A file that does not parse fails the start, as before.
func (s *Server) initialConfig() (*catalogconfig.File, []byte, error) {
	raw, missing, err := s.readFile()
	if err != nil {
		return nil, nil, err
	}
	if reason := undeclared(raw, missing); reason != "" {
		if prev, ok := s.lastApplied(); ok {
			f, err := catalogconfig.Parse(prev)
			if err == nil {
				s.log.Warn("catalog: extensions_config declares no servers; starting with the last applied configuration (write {\"mcpServers\": {}} to remove every server)",
					"path", s.path, "content", reason, "servers", len(f.Servers))
				sum := sha256Sum(raw)
				s.seen, s.candidate = sum, sum
				return f, prev, nil
			}
			s.log.Warn("catalog: the stored last applied configuration does not parse; ignoring it", "path", s.path, "err", err)
		}
	}
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if undeclared(raw, missing) == "" {
		s.rememberApplied(raw)
	}
	return f, raw, nil
}

// lastApplied returns the stored last applied content of the file.
func (s *Server) lastApplied() ([]byte, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	raw, ok, err := s.store.AppliedConfig(ctx, s.path)
	if err != nil {
		s.log.Warn("catalog: reading the last applied configuration failed", "path", s.path, "err", err)
		return nil, false
	}
	return raw, ok
}

// rememberApplied stores raw as the last applied content (when it declares
// servers; failures are logged, the running configuration is unaffected).
func (s *Server) rememberApplied(raw []byte) {
	if s.db != nil || undeclared(raw, false) != "" {
		// On PostgreSQL the stored server rows are the configuration (configdb.go).
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if prev, ok, err := s.store.AppliedConfig(ctx, s.path); err == nil && ok && bytes.Equal(prev, raw) {
		return
	}
	if err := s.store.PutAppliedConfig(ctx, s.path, raw); err != nil {
		s.log.Warn("catalog: recording the applied configuration failed", "path", s.path, "err", err)
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
