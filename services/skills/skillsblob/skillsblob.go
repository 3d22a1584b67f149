// Package skillsblob is the content-addressed file store of the skills
// service: every skill file is stored once, named by the SHA-256 of its
// bytes, under <root>/sha256/<first two hex>/<hex>. Writes are atomic (temp
// file in <root>/tmp, fsync, rename, fsync of the folder), so a crash never
// leaves a partial blob under a valid name; reads verify the digest. A
// folder shared by several processes (skills.blob_dir) is opened with
// OpenShared, whose deletions keep recently put blobs.
package skillsblob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotFound is returned by Get for an unknown digest.
var ErrNotFound = errors.New("skillsblob: blob not found")

// ErrCorrupt is returned by Get when the stored bytes do not match the digest.
var ErrCorrupt = errors.New("skillsblob: blob content does not match its digest")

// Store is a content-addressed blob store rooted at a folder. It is safe for
// concurrent use (rename is atomic; identical content lands on one name).
type Store struct {
	root string
	// grace > 0: the folder is shared by several processes (OpenShared).
	grace time.Duration
	now   func() time.Time
}

// Open creates (if needed) and opens the store at root, removing temp files
// left by an interrupted write.
func Open(root string) (*Store, error) { return OpenShared(root, 0) }

// OpenShared opens a store whose folder several processes share (a
// ReadWriteMany volume under skills.blob_dir). Each serialises its writes
// only in process, so removal is guarded by time, as in skillspg: Put of
// existing bytes renews the file's modification time, and Delete, GC and
// the temp-file cleanup at open leave alone whatever was written or put
// within grace — another process's install in flight. grace 0 is Open.
func OpenShared(root string, grace time.Duration) (*Store, error) {
	for _, d := range []string{filepath.Join(root, "sha256"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("skillsblob: %w", err)
		}
	}
	s := &Store{root: root, grace: grace, now: time.Now}
	ents, err := os.ReadDir(filepath.Join(root, "tmp"))
	if err != nil {
		return nil, fmt.Errorf("skillsblob: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(root, "tmp", e.Name())
		if !s.recent(p) {
			_ = os.Remove(p)
		}
	}
	return s, nil
}

// recent reports whether the file at p was written or put within the
// grace period (always false without one).
func (s *Store) recent(p string) bool {
	if s.grace <= 0 {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && s.now().Sub(fi.ModTime()) < s.grace
}

// Root returns the store folder.
func (s *Store) Root() string { return s.root }

// Digest returns the hex SHA-256 of data (the blob name).
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	_, err := hex.DecodeString(d)
	return err == nil && strings.ToLower(d) == d
}

func (s *Store) path(d string) string {
	return filepath.Join(s.root, "sha256", d[:2], d)
}

// Put stores data and returns its digest; created is false when the blob
// already existed.
func (s *Store) Put(data []byte) (digest string, created bool, err error) {
	digest = Digest(data)
	p := s.path(digest)
	if _, err := os.Stat(p); err == nil {
		if s.grace > 0 { // renew: a process about to reference it keeps it
			now := s.now()
			if err := os.Chtimes(p, now, now); err != nil {
				return "", false, fmt.Errorf("skillsblob: renew %s: %w", digest, err)
			}
		}
		return digest, false, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return "", false, fmt.Errorf("skillsblob: %w", err)
	}
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "blob-*")
	if err != nil {
		return "", false, fmt.Errorf("skillsblob: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o440)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return "", false, fmt.Errorf("skillsblob: write %s: %w", digest, err)
	}
	syncDir(filepath.Dir(p))
	return digest, true, nil
}

// Get returns the blob's bytes, verified against the digest.
func (s *Store) Get(digest string) ([]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("%w: invalid digest %q", ErrNotFound, digest)
	}
	data, err := os.ReadFile(s.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("skillsblob: %w", err)
	}
	if Digest(data) != digest {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, digest)
	}
	return data, nil
}

// Has reports whether the blob exists.
func (s *Store) Has(digest string) bool {
	if !validDigest(digest) {
		return false
	}
	_, err := os.Stat(s.path(digest))
	return err == nil
}

// Delete removes a blob; deleting a missing blob is not an error. In a
// shared folder a blob put within the grace period is kept.
func (s *Store) Delete(digest string) error {
	if !validDigest(digest) {
		return fmt.Errorf("skillsblob: invalid digest %q", digest)
	}
	if s.recent(s.path(digest)) {
		return nil
	}
	if err := os.Remove(s.path(digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("skillsblob: %w", err)
	}
	return nil
}

// List returns every stored digest (unordered).
func (s *Store) List() ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(s.root, "sha256"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && validDigest(d.Name()) {
			out = append(out, d.Name())
		}
		return nil
	})
	return out, err
}

// GC deletes every blob not in keep and returns how many were removed.
func (s *Store) GC(keep map[string]bool) (int, error) {
	all, err := s.List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range all {
		if !keep[d] && !s.recent(s.path(d)) {
			if err := s.Delete(d); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
