// Package skillsarchive reads skill packages from zip or tar.gz archives, or
// from inline files, with hardened checks (docs/architecture.md §11.1, docs/deerflow.md §4.12
// preflight and §4.13): every refusal is a *[RefusalError] carrying a stable
// [Reason] code and the offending entry.
//
// The package is read into memory (bounded by [Limits]); nothing touches the
// disk, so a refused archive leaves nothing behind. Persisting an accepted
// [Package] is the caller's job (see skillsblob).
package skillsarchive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/toolplane/toolplane/internal/archivekind"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reason is a stable refusal code (it appears in API errors and CLI output).
type Reason string

// Refusal reasons.
const (
	ReasonArchiveTooLarge  Reason = "archive_too_large"  // archive bytes over Limits.MaxArchiveBytes
	ReasonUnknownFormat    Reason = "unknown_format"     // neither zip nor gzip-compressed tar
	ReasonCorrupt          Reason = "corrupt_archive"    // the archive cannot be decoded
	ReasonAbsolutePath     Reason = "absolute_path"      // entry name starts with / or \
	ReasonTraversal        Reason = "path_traversal"     // entry name contains a ".." element
	ReasonColon            Reason = "colon_in_name"      // ':' (drive letters, NTFS streams)
	ReasonInvalidName      Reason = "invalid_name"       // control chars, backslash, empty element, non-UTF-8, too long
	ReasonSymlink          Reason = "symlink"            // symbolic link entry
	ReasonHardLink         Reason = "hard_link"          // tar hard link entry
	ReasonSpecialFile      Reason = "special_file"       // device, FIFO, sparse or other non-regular entry
	ReasonTooManyEntries   Reason = "too_many_entries"   // more than Limits.MaxEntries entries
	ReasonFileTooLarge     Reason = "file_too_large"     // one file over Limits.MaxFileBytes
	ReasonTooLarge         Reason = "unpacked_too_large" // total over Limits.MaxTotalBytes
	ReasonCompressionRatio Reason = "compression_ratio"  // unpacked/packed over Limits.MaxRatio
	ReasonExecutable       Reason = "executable_binary"  // ELF, PE or Mach-O magic
	ReasonNestedArchive    Reason = "nested_archive"     // an archive inside the archive
	ReasonNestedSkillMD    Reason = "nested_skill_md"    // a SKILL.md below the skill root
	ReasonDuplicate        Reason = "duplicate_entry"    // same path twice (also case-insensitively, or file vs folder)
	ReasonMissingSkillMD   Reason = "missing_skill_md"   // no SKILL.md at the skill root
	ReasonMultipleRoots    Reason = "multiple_top_level" // several top-level folders, no root SKILL.md
	ReasonEmpty            Reason = "empty_package"      // no files
)

// RefusalError is returned for every refused package.
type RefusalError struct {
	Reason Reason
	// Entry is the archive entry name (sanitised for display), or "".
	Entry  string
	Detail string
}

// Error renders "reason: entry: detail".
func (e *RefusalError) Error() string {
	if e.Entry != "" {
		return fmt.Sprintf("%s: %q: %s", e.Reason, e.Entry, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Detail)
}

// ReasonOf returns the refusal reason of err, or "" when err is not a refusal.
func ReasonOf(err error) Reason {
	var r *RefusalError
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// Limits bounds what a package may contain. Zero fields take the defaults of
// [DefaultLimits].
type Limits struct {
	MaxArchiveBytes int64 // default 50 MiB (docs/architecture.md §11.1)
	MaxEntries      int   // default 4096 (docs/deerflow.md §4.12)
	MaxFileBytes    int64 // default 64 MiB
	MaxTotalBytes   int64 // default 512 MiB
	// MaxRatio is the largest allowed unpacked/packed ratio (default 100). It is
	// applied once the unpacked total exceeds RatioFloorBytes (default 1 MiB),
	// so small, highly repetitive text files are not refused.
	MaxRatio        int64
	RatioFloorBytes int64
}

// DefaultLimits returns the limits of docs/architecture.md §11.1.
func DefaultLimits() Limits {
	return Limits{MaxArchiveBytes: 50 << 20, MaxEntries: 4096, MaxFileBytes: 64 << 20,
		MaxTotalBytes: 512 << 20, MaxRatio: 100, RatioFloorBytes: 1 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = d.MaxArchiveBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = d.MaxRatio
	}
	if l.RatioFloorBytes <= 0 {
		l.RatioFloorBytes = d.RatioFloorBytes
	}
	return l
}

// File is one regular file of a package.
type File struct {
	// Path is slash-separated and relative to the skill root (e.g. "scripts/run.py").
	Path string
	Data []byte
	// Executable reports whether the archive marked the file executable.
	Executable bool
}

// Package is an accepted skill package: files sorted by path, SKILL.md at the root.
type Package struct {
	// RootName is the single top-level folder the archive had, or "" when the
	// files sat at the archive root (or came inline).
	RootName string
	Files    []File
}

// File returns the file at p, or nil.
func (p *Package) File(name string) *File {
	i := sort.Search(len(p.Files), func(i int) bool { return p.Files[i].Path >= name })
	if i < len(p.Files) && p.Files[i].Path == name {
		return &p.Files[i]
	}
	return nil
}

// TotalBytes is the sum of the file sizes.
func (p *Package) TotalBytes() int64 {
	var n int64
	for _, f := range p.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Read decodes a zip or tar.gz archive (format detected from its magic bytes).
func Read(data []byte, lim Limits) (*Package, error) {
	b, err := decode(data, lim)
	if err != nil {
		return nil, err
	}
	return b.finish()
}

// decode reads every entry of a zip or tar.gz archive (format from its
// magic bytes) through the builder's entry checks: the part [Read] and
// [ReadEntries] share.
func decode(data []byte, lim Limits) (*builder, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxArchiveBytes {
		return nil, &RefusalError{Reason: ReasonArchiveTooLarge,
			Detail: fmt.Sprintf("archive is %d bytes; the limit is %d", len(data), lim.MaxArchiveBytes)}
	}
	b := newBuilder(lim, int64(len(data)))
	var err error
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06")):
		err = b.readZip(data)
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		err = b.readTarGz(data)
	default:
		return nil, &RefusalError{Reason: ReasonUnknownFormat, Detail: "expected a zip or tar.gz archive"}
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ReadEntries decodes an archive like [Read], with every entry check (names,
// traversal, links, special files, sizes, ratio, binaries, nested
// archives), but without the layout rules of a skill package: any folder
// structure, no SKILL.md needed. Paths are as in the archive; RootName is
// empty. It is how an archive that is not a skill (an upload) is scanned.
func ReadEntries(data []byte, lim Limits) (*Package, error) {
	b, err := decode(data, lim)
	if err != nil {
		return nil, err
	}
	files := append([]File(nil), b.files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return &Package{Files: files}, nil
}

// FromFiles builds a package from inline files (path → content), applying the
// same name, size, content and layout checks as [Read]. executable lists paths
// to mark executable (may be nil).
func FromFiles(files map[string][]byte, executable map[string]bool, lim Limits) (*Package, error) {
	lim = lim.withDefaults()
	b := newBuilder(lim, 0)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > lim.MaxEntries {
		return nil, &RefusalError{Reason: ReasonTooManyEntries,
			Detail: fmt.Sprintf("%d files; the limit is %d", len(names), lim.MaxEntries)}
	}
	for _, n := range names {
		if err := b.addFile(n, bytes.NewReader(files[n]), int64(len(files[n])), executable[n]); err != nil {
			return nil, err
		}
	}
	return b.finish()
}

type builder struct {
	lim     Limits
	packed  int64
	total   int64
	entries int
	files   []File
	seen    map[string]string // lower-cased path -> original
	dirs    map[string]bool   // lower-cased folder paths implied by files
}

func newBuilder(lim Limits, packed int64) *builder {
	return &builder{lim: lim, packed: packed, seen: map[string]string{}, dirs: map[string]bool{}}
}

func (b *builder) countEntry(name string) error {
	b.entries++
	if b.entries > b.lim.MaxEntries {
		return &RefusalError{Reason: ReasonTooManyEntries, Entry: display(name),
			Detail: fmt.Sprintf("more than %d entries", b.lim.MaxEntries)}
	}
	return nil
}

// zipEntryCount reads the entry count from the end-of-central-directory
// record (zip64 aware) without parsing the directory, so an archive claiming
// millions of entries is refused before archive/zip allocates them. ok is
// false when the record cannot be found (archive/zip then decides).
func zipEntryCount(data []byte) (n uint64, ok bool) {
	start := max(0, len(data)-(22+65535))
	i := bytes.LastIndex(data[start:], []byte("PK\x05\x06"))
	if i < 0 {
		return 0, false
	}
	eocd := data[start+i:]
	if len(eocd) < 22 {
		return 0, false
	}
	n = uint64(binary.LittleEndian.Uint16(eocd[10:12]))
	if n != 0xffff {
		return n, true
	}
	// zip64: the locator sits just before the EOCD record.
	loc := start + i - 20
	if loc < 0 || !bytes.Equal(data[loc:loc+4], []byte("PK\x06\x07")) {
		return n, true
	}
	off := binary.LittleEndian.Uint64(data[loc+8 : loc+16])
	if len(data) < 56 || off > uint64(len(data)-56) || !bytes.Equal(data[off:off+4], []byte("PK\x06\x06")) {
		return n, true
	}
	return binary.LittleEndian.Uint64(data[off+32 : off+40]), true
}

func (b *builder) readZip(data []byte) error {
	if n, ok := zipEntryCount(data); ok && n > uint64(b.lim.MaxEntries) {
		return &RefusalError{Reason: ReasonTooManyEntries,
			Detail: fmt.Sprintf("the archive declares %d entries; the limit is %d", n, b.lim.MaxEntries)}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return &RefusalError{Reason: ReasonCorrupt, Detail: err.Error()}
	}
	if len(zr.File) > b.lim.MaxEntries {
		return &RefusalError{Reason: ReasonTooManyEntries,
			Detail: fmt.Sprintf("%d entries; the limit is %d", len(zr.File), b.lim.MaxEntries)}
	}
	// Declared sizes first: refuse bombs before inflating anything.
	var declared uint64
	for _, f := range zr.File {
		if f.UncompressedSize64 > uint64(b.lim.MaxFileBytes) {
			return &RefusalError{Reason: ReasonFileTooLarge, Entry: display(f.Name),
				Detail: fmt.Sprintf("declares %d bytes; the limit is %d", f.UncompressedSize64, b.lim.MaxFileBytes)}
		}
		declared += f.UncompressedSize64
		if declared > uint64(b.lim.MaxTotalBytes) {
			return &RefusalError{Reason: ReasonTooLarge, Entry: display(f.Name),
				Detail: fmt.Sprintf("declares more than %d unpacked bytes", b.lim.MaxTotalBytes)}
		}
	}
	if err := b.checkRatio(int64(declared), ""); err != nil {
		return err
	}
	for _, f := range zr.File {
		if err := b.countEntry(f.Name); err != nil {
			return err
		}
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return &RefusalError{Reason: ReasonSymlink, Entry: display(f.Name), Detail: "symbolic links are not allowed"}
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			if _, err := cleanName(f.Name, true); err != nil {
				return err
			}
			continue
		case !mode.IsRegular():
			return &RefusalError{Reason: ReasonSpecialFile, Entry: display(f.Name), Detail: "only regular files and folders are allowed"}
		}
		rc, err := f.Open()
		if err != nil {
			return &RefusalError{Reason: ReasonCorrupt, Entry: display(f.Name), Detail: err.Error()}
		}
		err = b.addFile(f.Name, rc, -1, mode&0o111 != 0)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) readTarGz(data []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return &RefusalError{Reason: ReasonCorrupt, Detail: err.Error()}
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &RefusalError{Reason: ReasonCorrupt, Detail: err.Error()}
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := b.countEntry(h.Name); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			return &RefusalError{Reason: ReasonSymlink, Entry: display(h.Name), Detail: "symbolic links are not allowed"}
		case tar.TypeLink:
			return &RefusalError{Reason: ReasonHardLink, Entry: display(h.Name), Detail: "hard links are not allowed"}
		case tar.TypeDir:
			if _, err := cleanName(h.Name, true); err != nil {
				return err
			}
			if h.Size != 0 {
				// The tar reader would inflate and discard the data unseen.
				return &RefusalError{Reason: ReasonCorrupt, Entry: display(h.Name), Detail: "a folder entry carries data"}
			}
			continue
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA still appears in old archives
		default:
			return &RefusalError{Reason: ReasonSpecialFile, Entry: display(h.Name),
				Detail: fmt.Sprintf("entry type %q is not a regular file or folder", h.Typeflag)}
		}
		if h.Size > b.lim.MaxFileBytes {
			return &RefusalError{Reason: ReasonFileTooLarge, Entry: display(h.Name),
				Detail: fmt.Sprintf("declares %d bytes; the limit is %d", h.Size, b.lim.MaxFileBytes)}
		}
		if err := b.addFile(h.Name, tr, h.Size, h.Mode&0o111 != 0); err != nil {
			return err
		}
	}
}

func (b *builder) checkRatio(total int64, entry string) error {
	if b.packed > 0 && total > b.lim.RatioFloorBytes && total > b.packed*b.lim.MaxRatio {
		return &RefusalError{Reason: ReasonCompressionRatio, Entry: display(entry),
			Detail: fmt.Sprintf("unpacks to more than %d times the archive size (%d bytes packed)", b.lim.MaxRatio, b.packed)}
	}
	return nil
}

// addFile validates the name, reads at most the limits, and checks content.
func (b *builder) addFile(name string, r io.Reader, _ int64, exec bool) error {
	clean, err := cleanName(name, false)
	if err != nil {
		return err
	}
	if path.Base(clean) == "__MACOSX" || strings.HasPrefix(clean, "__MACOSX/") {
		// macOS resource forks: never part of a skill; skip silently (docs/deerflow.md §4.13).
		return nil
	}
	lower := strings.ToLower(clean)
	if prev, dup := b.seen[lower]; dup {
		return &RefusalError{Reason: ReasonDuplicate, Entry: display(name), Detail: fmt.Sprintf("duplicates %q", prev)}
	}
	if b.dirs[lower] {
		return &RefusalError{Reason: ReasonDuplicate, Entry: display(name), Detail: "a folder of the same name exists"}
	}
	for d := path.Dir(lower); d != "."; d = path.Dir(d) {
		if prev, isFile := b.seen[d]; isFile {
			return &RefusalError{Reason: ReasonDuplicate, Entry: display(name), Detail: fmt.Sprintf("its folder %q is also a file", prev)}
		}
		b.dirs[d] = true
	}
	remaining := b.lim.MaxTotalBytes - b.total
	max := b.lim.MaxFileBytes
	limitReason := ReasonFileTooLarge
	if remaining < max {
		max, limitReason = remaining, ReasonTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return &RefusalError{Reason: ReasonCorrupt, Entry: display(name), Detail: err.Error()}
	}
	if int64(len(data)) > max {
		return &RefusalError{Reason: limitReason, Entry: display(name),
			Detail: fmt.Sprintf("unpacks past the limit (%d bytes per file, %d in total)", b.lim.MaxFileBytes, b.lim.MaxTotalBytes)}
	}
	b.total += int64(len(data))
	if err := b.checkRatio(b.total, name); err != nil {
		return err
	}
	if kind := ExecutableKind(data); kind != "" {
		return &RefusalError{Reason: ReasonExecutable, Entry: display(name), Detail: kind + " executable content is not allowed in a skill"}
	}
	if kind := ArchiveKind(clean, data); kind != "" {
		return &RefusalError{Reason: ReasonNestedArchive, Entry: display(name), Detail: "nested " + kind + " archives are not allowed"}
	}
	b.seen[lower] = clean
	b.files = append(b.files, File{Path: clean, Data: data, Executable: exec})
	return nil
}

// finish picks the skill root and checks the layout.
func (b *builder) finish() (*Package, error) {
	if len(b.files) == 0 {
		return nil, &RefusalError{Reason: ReasonEmpty, Detail: "the package contains no files"}
	}
	pkg := &Package{}
	// Single top-level folder = skill root (dotfiles at the top level ignored
	// for this decision, docs/deerflow.md §4.13, and then dropped).
	tops := map[string]bool{}
	rootFile := false
	for _, f := range b.files {
		first, _, nested := strings.Cut(f.Path, "/")
		if !nested {
			if !strings.HasPrefix(first, ".") {
				rootFile = true
			}
			continue
		}
		tops[first] = true
	}
	files := b.files
	if !rootFile && len(tops) == 1 {
		for t := range tops {
			pkg.RootName = t
		}
		prefix := pkg.RootName + "/"
		files = files[:0:0]
		for _, f := range b.files {
			if strings.HasPrefix(f.Path, prefix) {
				f.Path = strings.TrimPrefix(f.Path, prefix)
				files = append(files, f)
			}
		}
	} else if !rootFile && len(tops) > 1 {
		return nil, &RefusalError{Reason: ReasonMultipleRoots,
			Detail: "the archive must hold one skill folder (or SKILL.md at its root)"}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	hasRoot := false
	for _, f := range files {
		base := path.Base(f.Path)
		if f.Path == "SKILL.md" {
			hasRoot = true
		} else if strings.EqualFold(base, "SKILL.md") {
			return nil, &RefusalError{Reason: ReasonNestedSkillMD, Entry: display(f.Path),
				Detail: "only the skill root may contain a SKILL.md (one skill per package)"}
		}
	}
	if !hasRoot {
		return nil, &RefusalError{Reason: ReasonMissingSkillMD, Detail: "no SKILL.md at the skill root"}
	}
	pkg.Files = files
	return pkg, nil
}

// cleanName validates an entry name and returns it slash-cleaned, without a
// leading "./" or trailing "/".
func cleanName(name string, dir bool) (string, error) {
	fail := func(r Reason, d string) (string, error) {
		return "", &RefusalError{Reason: r, Entry: display(name), Detail: d}
	}
	if name == "" {
		return fail(ReasonInvalidName, "empty name")
	}
	if !utf8.ValidString(name) {
		return fail(ReasonInvalidName, "name is not valid UTF-8")
	}
	if strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
		return fail(ReasonAbsolutePath, "absolute paths are not allowed")
	}
	if strings.Contains(name, ":") {
		return fail(ReasonColon, "':' is not allowed in names (drive letters, alternate data streams)")
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return fail(ReasonTraversal, `".." elements are not allowed`)
		}
	}
	if strings.Contains(name, `\`) {
		return fail(ReasonInvalidName, "backslashes are not allowed in names")
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == 0x7f {
			return fail(ReasonInvalidName, "control characters are not allowed in names")
		}
	}
	n := strings.TrimPrefix(name, "./")
	if dir {
		n = strings.TrimSuffix(n, "/")
		if n == "" || n == "." {
			return ".", nil
		}
	}
	if len(n) > 1024 {
		return fail(ReasonInvalidName, "name longer than 1024 bytes")
	}
	for _, el := range strings.Split(n, "/") {
		switch {
		case el == "" || el == ".":
			return fail(ReasonInvalidName, "empty or '.' path element")
		case len(el) > 255:
			return fail(ReasonInvalidName, "path element longer than 255 bytes")
		}
	}
	return n, nil
}

// display makes an entry name safe to print (control characters escaped, bounded).
func display(name string) string {
	var sb strings.Builder
	for i, r := range name {
		if i > 200 {
			sb.WriteString("...")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			fmt.Fprintf(&sb, "\\x%02x", name[i])
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// ExecutableKind returns "ELF", "PE" or "Mach-O" when data starts with that
// executable format's magic, else "".
func ExecutableKind(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x7fELF")):
		return "ELF"
	case bytes.HasPrefix(data, []byte("MZ")):
		// DOS/PE stub. Plain text that happens to start with "MZ" is not binary.
		if utf8.Valid(data) && !bytes.ContainsRune(data, 0) {
			return ""
		}
		return "PE"
	case bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfa, 0xce}), bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfa, 0xcf}),
		bytes.HasPrefix(data, []byte{0xce, 0xfa, 0xed, 0xfe}), bytes.HasPrefix(data, []byte{0xcf, 0xfa, 0xed, 0xfe}),
		bytes.HasPrefix(data, []byte{0xca, 0xfe, 0xba, 0xbe}):
		return "Mach-O"
	}
	return ""
}

// ArchiveKind returns a short name when data (or, failing that, the file
// name's extension) marks an archive or compressed stream, else ""
// (internal/archivekind, shared with the runtime's upload classification).
func ArchiveKind(name string, data []byte) string { return archivekind.Of(name, data) }

// Digest returns the package digest: the hex SHA-256 over, for every file in
// path order, "<path>\x00<hex sha256 of content>\n". Two packages with the
// same paths and bytes have the same digest whatever the archive format.
func (p *Package) Digest() string {
	h := sha256.New()
	for _, f := range p.Files {
		sum := sha256.Sum256(f.Data)
		fmt.Fprintf(h, "%s\x00%s\n", f.Path, hex.EncodeToString(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}
