package runtimetools

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane/internal/archivekind"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// Uploads (docs/decisions/0150-where-acp-and-workspace-servers-run.md,
// "Uploads"): files reach <thread>/user-data/uploads only through a staged
// copy in <thread>/.upload-staging (outside user-data, so no tool sees a
// partial file), renamed into place once complete and accepted. Every path
// goes through an os.Root of the thread folder.
const (
	uploadsVirtual = "/mnt/user-data/uploads/"
	stagingDir     = ".upload-staging"
	// uploadListBound bounds the files a listing or a quota sum visits.
	uploadListBound = 10000
)

// UploadNameProblem returns why name cannot be an uploaded file's name, or
// "": a base name without '/', '\', NUL or control characters, not
// starting with '.', valid UTF-8, at most 255 bytes.
func UploadNameProblem(name string) string {
	switch {
	case name == "":
		return "required"
	case len(name) > 255:
		return "longer than 255 bytes"
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case strings.ContainsAny(name, "/\\"):
		return "must be a file name without '/' or '\\' (no folders)"
	case strings.HasPrefix(name, "."):
		return "must not start with '.' (no hidden files, '.' or '..')"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || unicode.Is(unicode.Cc, r) {
			return "must not contain NUL or control characters"
		}
		if unicode.Is(unicode.Cf, r) {
			return "must not contain invisible format characters (bidi overrides, zero-width)"
		}
	}
	return ""
}

// StagedUpload is an upload being received.
type StagedUpload struct {
	root     *os.Root
	f        *os.File
	tmp      string
	n, limit int64
	sum      hash.Hash
	head     []byte
}

// ErrUploadTooLarge is returned by Write once the file exceeds its limit.
var ErrUploadTooLarge = errors.New("upload exceeds its size limit")

// StageUpload opens a staging file for thread id, refused beyond limit
// bytes (0: unbounded).
func (w *Workspace) StageUpload(threadID string, limit int64) (*StagedUpload, error) {
	if _, err := w.Root(threadID); err != nil { // creates user-data/{workspace,outputs,uploads}
		return nil, err
	}
	root, err := os.OpenRoot(w.ThreadDir(threadID))
	if err != nil {
		return nil, err
	}
	if err := root.MkdirAll(stagingDir, 0o700); err != nil {
		root.Close()
		return nil, err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(stagingDir, hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &StagedUpload{root: root, f: f, tmp: tmp, limit: limit, sum: sha256.New()}, nil
}

// Write appends p; past the limit it fails with ErrUploadTooLarge and
// writes nothing more.
func (u *StagedUpload) Write(p []byte) (int, error) {
	if u.limit > 0 && u.n+int64(len(p)) > u.limit {
		return 0, ErrUploadTooLarge
	}
	if len(u.head) < 512 {
		u.head = append(u.head, p[:min(len(p), 512-len(u.head))]...)
	}
	n, err := u.f.Write(p)
	u.n += int64(n)
	u.sum.Write(p[:n])
	return n, err
}

// Size is the number of bytes received.
func (u *StagedUpload) Size() int64 { return u.n }

// Head is the first 512 bytes (content sniffing, shebang).
func (u *StagedUpload) Head() []byte { return u.head }

// SHA256 is the hex digest of what was received.
func (u *StagedUpload) SHA256() string { return hex.EncodeToString(u.sum.Sum(nil)) }

// Bytes reads the staged file back (for the scan), at most max bytes.
func (u *StagedUpload) Bytes(max int64) ([]byte, error) {
	if u.n > max {
		return nil, fmt.Errorf("staged file of %d bytes exceeds %d", u.n, max)
	}
	return u.root.ReadFile(u.tmp)
}

// Discard removes the staged file.
func (u *StagedUpload) Discard() {
	if u.f != nil {
		u.f.Close()
		u.f = nil
	}
	_ = u.root.Remove(u.tmp)
	u.root.Close()
}

// UploadsBytes sums the sizes of the files in uploads/ except skip
// (bounded to uploadListBound entries).
func (u *StagedUpload) UploadsBytes(skip string) (int64, error) {
	var total int64
	n := 0
	err := fs.WalkDir(u.root.FS(), "user-data/uploads", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > uploadListBound {
			return fmt.Errorf("more than %d entries in uploads", uploadListBound)
		}
		if d.Type().IsRegular() && p != "user-data/uploads/"+skip {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// Commit moves the staged file to uploads/<name> (replacing a file of that
// name) and reports whether one was replaced. The staged file is gone
// afterwards either way.
func (u *StagedUpload) Commit(name string) (bool, error) {
	defer u.Discard()
	if err := u.f.Sync(); err != nil {
		return false, err
	}
	if err := u.f.Close(); err != nil {
		return false, err
	}
	u.f = nil
	dst := "user-data/uploads/" + name
	fi, err := u.root.Lstat(dst)
	replaced := err == nil
	if replaced && !fi.Mode().IsRegular() {
		return false, fmt.Errorf("uploads/%s exists and is not a regular file", name)
	}
	return replaced, u.root.Rename(u.tmp, dst)
}

// Existing reports the size of uploads/<name> (-1 when absent).
func (u *StagedUpload) Existing(name string) int64 {
	fi, err := u.root.Lstat("user-data/uploads/" + name)
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}

// UploadMIME is the MIME type of an upload: as sent when it parses, else
// by extension, else sniffed from the content.
func UploadMIME(sent, name string, head []byte) string {
	if sent != "" {
		if mt, _, err := mime.ParseMediaType(sent); err == nil {
			return mt
		}
	}
	if mt := mime.TypeByExtension(path.Ext(name)); mt != "" {
		mt, _, _ = strings.Cut(mt, ";")
		return mt
	}
	mt, _, _ := strings.Cut(http.DetectContentType(head), ";")
	return mt
}

// Kinds of uploads that are scanned like skill packages
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
const (
	UploadData    = ""
	UploadArchive = "archive"
	UploadScript  = "script"
)

// scriptExts are the extensions of programs an interpreter runs; an upload
// with one is scanned as a skill's scripts/ file (services/skills/skillsscan
// scans a scripts/ file of no recognised language as a shell script).
var scriptExts = map[string]bool{
	".sh": true, ".bash": true, ".zsh": true, ".ksh": true, ".dash": true, ".ash": true, ".csh": true, ".tcsh": true, ".fish": true, ".command": true,
	".py": true, ".pyw": true, ".pyz": true,
	".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".mts": true, ".cts": true, ".jsx": true, ".tsx": true, ".jse": true,
	".pl": true, ".pm": true, ".t": true, ".rb": true, ".php": true, ".phtml": true, ".phar": true, ".lua": true, ".tcl": true, ".awk": true,
	".r": true, ".jl": true, ".groovy": true, ".kts": true, ".ps1": true, ".psm1": true, ".psd1": true,
	".bat": true, ".cmd": true, ".vbs": true, ".vbe": true, ".wsf": true, ".wsh": true, ".hta": true, ".applescript": true, ".scpt": true,
}

// UploadUnscannable is the kind of an archive or compressed stream the
// skills scan cannot open (tar, bzip2, xz, zstd, 7z, rar): refused, never
// stored unscanned.
const UploadUnscannable = "unscannable archive"

// scannableArchives are the archivekind.Of names the skills scan
// reads (zip and gzip-compressed tar, services/skills/skillsarchive; internal/archivekind).
var scannableArchives = map[string]bool{"zip": true, "jar": true, "war": true, "whl": true, "skill": true, "gzip": true, "gz": true, "tgz": true}

// utf8BOM is the byte order mark some editors put before a "#!" line.
const utf8BOM = "\xef\xbb\xbf"

// UploadKind says how an upload is scanned, by content as well as name: an
// archive by its magic bytes or extension (zip, jar, gzip/tar.gz: a skill
// archive scanned entry by entry; tar, bzip2, xz, zstd, 7z, rar:
// UploadUnscannable), a script by extension or a "#!" first line (after a
// UTF-8 byte order mark and leading white space), else data.
func UploadKind(name string, head []byte) string {
	low := strings.ToLower(name)
	if strings.HasSuffix(low, ".skill") {
		return UploadArchive
	}
	if k := archivekind.Of(low, head); k != "" {
		if scannableArchives[k] {
			return UploadArchive
		}
		return UploadUnscannable
	}
	body := strings.TrimLeft(strings.TrimPrefix(string(head), utf8BOM), " \t\r\n")
	if scriptExts[path.Ext(low)] || strings.HasPrefix(body, "#!") {
		return UploadScript
	}
	return UploadData
}

// uploadEntry is one file of list_uploaded_files.
type uploadEntry struct {
	Path     string   `json:"path"`
	Size     int64    `json:"size"`
	Modified string   `json:"modified"`
	MIMEType string   `json:"mime_type"`
	Outline  []string `json:"outline,omitempty"`
}

// Outline bounds.
const (
	outlineHeadings = 20
	outlineScanMax  = 1 << 20
)

// listUploadedFiles implements list_uploaded_files (docs/deerflow.md §1.6):
// the regular files under uploads/, sorted by path, at most max_results
// (default 100, at most 1000); with include_outline the first 20 Markdown
// headings of each text file (read up to 1 MiB). Symlinks are not
// followed.
func (s *Dispatcher) listUploadedFiles(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	if ec.Thread.Child != nil {
		return nil, runtimechain.Business("list_uploaded_files is for the lead agent; subagents read the files they are given")
	}
	max := 100
	if n, ok := intArg(ec.Args, "max_results"); ok {
		if n < 1 || n > 1000 {
			return nil, runtimechain.Business("max_results must be 1..1000")
		}
		max = n
	}
	outline, _ := ec.Args["include_outline"].(bool)
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var files []uploadEntry
	total, visited := 0, 0
	err = fs.WalkDir(r.FS(), "uploads", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if visited++; visited > uploadListBound {
			return fs.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		total++
		if len(files) >= max {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		e := uploadEntry{Path: "/mnt/user-data/" + p, Size: info.Size(), Modified: info.ModTime().UTC().Format(time.RFC3339)}
		head := readHead(r, p, 512)
		e.MIMEType = UploadMIME("", p, head)
		if outline && isText(e.MIMEType, head) {
			e.Outline = markdownOutline(r, p)
		}
		files = append(files, e)
		return nil
	})
	if err != nil {
		return nil, fsErr("/mnt/user-data/uploads", err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	out := map[string]any{"files": files, "count": len(files), "total": total}
	if files == nil {
		out["files"] = []uploadEntry{}
	}
	if total > len(files) {
		out["truncated"] = true
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return &runtimechain.Outcome{Text: string(b)}, nil
}

func readHead(r *os.Root, p string, n int) []byte {
	f, err := r.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, n)
	k, _ := io.ReadFull(f, buf)
	return buf[:k]
}

func isText(mt string, head []byte) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || (utf8.Valid(head) && !strings.ContainsRune(string(head), 0))
}

// markdownOutline returns up to outlineHeadings ATX headings ("# ...") of a
// text file, outside fenced code blocks.
func markdownOutline(r *os.Root, p string) []string {
	f, err := r.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, outlineScanMax))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var out []string
	fence := false
	for sc.Scan() && len(out) < outlineHeadings {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level > 6 || len(line) == level || line[level] != ' ' {
			continue
		}
		out = append(out, line)
	}
	return out
}
