package skillspg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/internal/pgstore"
	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// blobTimeout bounds one blob call (skillsstore.Blobs has no context); a
// blob is one file, at most skills.limits.max_file_bytes (64 MiB by default).
const blobTimeout = time.Minute

// Blobs is skillsstore.Blobs on the skills.blobs table: one row per
// digest, the bytes in bytea (PostgreSQL's limit is 1 GiB a value, far
// above the file limit). Get verifies the digest.
//
// Several replicas share the table while each serialises its writes only
// in process, so deletion is guarded by time instead: Put inserts the
// bytes or, when they exist, refreshes their touch time; Delete and GC
// remove a blob only when no replica has put it within the grace period
// (minAge). A replica whose install failed "deletes" its new blobs, which
// another replica's concurrent install of the same bytes may reference;
// within the grace period the delete is a no-op and GC collects the blob
// later if it stays unreferenced.
type Blobs struct {
	pool *pgxpool.Pool
	// minAge is the grace period after a Put during which the blob is kept.
	minAge time.Duration
	now    func() time.Time
}

var _ skillsstore.Blobs = (*Blobs)(nil)

// OpenBlobs migrates the skills schema and returns the blob store over
// pool. Delete and GC keep a blob put within minAge: with several
// replicas, a blob another replica has just put for an install whose
// metadata is not committed yet is unreferenced for a moment, and must not
// be removed (0 = remove at once, for one process).
func OpenBlobs(ctx context.Context, pool *pgxpool.Pool, minAge time.Duration) (*Blobs, error) {
	if err := pgstore.Migrate(ctx, pool, Schema, Migrations()); err != nil {
		return nil, err
	}
	return &Blobs{pool: pool, minAge: minAge, now: time.Now}, nil
}

func bctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), blobTimeout)
}

func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	return strings.Trim(d, "0123456789abcdef") == ""
}

// Put implements skillsstore.Blobs.
func (b *Blobs) Put(data []byte) (string, bool, error) {
	digest := skillsblob.Digest(data)
	if data == nil {
		data = []byte{}
	}
	ctx, cancel := bctx()
	defer cancel()
	// xmax = 0 on the returned row: it was inserted, not updated.
	var inserted bool
	err := b.pool.QueryRow(ctx, `INSERT INTO skills.blobs (digest, data, touched_ns) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO UPDATE SET touched_ns = GREATEST(skills.blobs.touched_ns, excluded.touched_ns)
		RETURNING xmax = 0`, digest, data, b.now().UnixNano()).Scan(&inserted)
	if err != nil {
		return "", false, fmt.Errorf("skillspg: write blob %s: %w", digest, err)
	}
	return digest, inserted, nil
}

// Get implements skillsstore.Blobs.
func (b *Blobs) Get(digest string) ([]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("%w: invalid digest %q", skillsblob.ErrNotFound, digest)
	}
	ctx, cancel := bctx()
	defer cancel()
	var data []byte
	err := b.pool.QueryRow(ctx, `SELECT data FROM skills.blobs WHERE digest = $1`, digest).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", skillsblob.ErrNotFound, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("skillspg: read blob %s: %w", digest, err)
	}
	if skillsblob.Digest(data) != digest {
		return nil, fmt.Errorf("%w: %s", skillsblob.ErrCorrupt, digest)
	}
	return data, nil
}

// Has implements skillsstore.Blobs (false also when the database fails).
func (b *Blobs) Has(digest string) bool {
	if !validDigest(digest) {
		return false
	}
	ctx, cancel := bctx()
	defer cancel()
	var ok bool
	err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skills.blobs WHERE digest = $1)`, digest).Scan(&ok)
	return err == nil && ok
}

// Delete implements skillsstore.Blobs; a blob put within the grace period
// is kept (see Blobs).
func (b *Blobs) Delete(digest string) error {
	if !validDigest(digest) {
		return fmt.Errorf("skillspg: invalid digest %q", digest)
	}
	ctx, cancel := bctx()
	defer cancel()
	if _, err := b.pool.Exec(ctx, `DELETE FROM skills.blobs WHERE digest = $1 AND touched_ns <= $2`, digest, b.now().Add(-b.minAge).UnixNano()); err != nil {
		return fmt.Errorf("skillspg: delete blob %s: %w", digest, err)
	}
	return nil
}

// List implements skillsstore.Blobs.
func (b *Blobs) List() ([]string, error) {
	ctx, cancel := bctx()
	defer cancel()
	rows, err := b.pool.Query(ctx, `SELECT digest FROM skills.blobs`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// GC implements skillsstore.Blobs: one statement deletes every blob not in
// keep that was not put within the grace period.
func (b *Blobs) GC(keep map[string]bool) (int, error) {
	ids := make([]string, 0, len(keep))
	for d, k := range keep {
		if k {
			ids = append(ids, d)
		}
	}
	ctx, cancel := bctx()
	defer cancel()
	tag, err := b.pool.Exec(ctx, `DELETE FROM skills.blobs WHERE touched_ns <= $1 AND NOT (digest = ANY($2))`, b.now().Add(-b.minAge).UnixNano(), ids)
	if err != nil {
		return 0, fmt.Errorf("skillspg: blob gc: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
