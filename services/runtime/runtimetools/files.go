package runtimetools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// Virtual file system of a thread (docs/deerflow.md §6.2 ThreadData):
// /mnt/user-data/{workspace,outputs,uploads} map to
// <data dir>/runtime/threads/<id>/user-data/...; /mnt/skills/<category>/<name>/...
// is read through the skills service. Every access goes through os.Root,
// so neither `..` nor a symlink can leave the thread's folder.
const (
	userDataRoot = "/mnt/user-data/"
	skillsRoot   = "/mnt/skills/"
	outputsRoot  = "/mnt/user-data/outputs/"
)

// WorkspaceDirs are the writable and read-only roots under
// /mnt/user-data (docs/deerflow.md §6.2 ThreadData).
var WorkspaceDirs = []string{"workspace", "outputs", "uploads"}

// Workspace is the thread file systems under <data dir>/runtime/threads:
// one folder per thread, reached only through os.Root, plus the per
// (thread, path) locks of the read-before-write gate.
type Workspace struct {
	dir   string
	locks keyedLocks
	// quota is runtime.limits.workspace.thread_quota_bytes (0: unbounded),
	// applied to saved tool results too (SaveResult).
	quota atomic.Int64
}

// NewWorkspace returns the workspace rooted at dir (<data dir>/runtime).
func NewWorkspace(dir string) *Workspace { return &Workspace{dir: dir} }

// ThreadsDir is the folder holding one folder per thread.
func (w *Workspace) ThreadsDir() string { return filepath.Join(w.dir, "threads") }

// ThreadDir is a thread's folder.
func (w *Workspace) ThreadDir(id string) string { return filepath.Join(w.dir, "threads", id) }

// WritablePath returns the cleaned virtual path when p is a writable path.
func (w *Workspace) WritablePath(p string) (string, bool) {
	clean, _, err := CleanVirtual(p, true)
	return clean, err == nil
}

// Lock serialises work on key (read-before-write gate + write per thread
// and path) until the returned func is called.
func (w *Workspace) Lock(key string) func() { return w.locks.lock(key) }

// reserve serialises the quota check and the write of one thread's files,
// so concurrent writers on a thread cannot each see room for their bytes
// and together exceed runtime.limits.workspace.thread_quota_bytes: the
// check and the write are one atomic reservation. It is taken after the
// read-before-write gate's (thread, path) lock, never before, so the two
// cannot deadlock.
func (w *Workspace) reserve(threadID string) func() { return w.locks.lock("quota\x00" + threadID) }

// CleanVirtual validates and cleans a virtual path; it returns the path
// relative to the user-data root ("workspace/a.txt").
func CleanVirtual(p string, writable bool) (clean, rel string, err error) {
	if p == "" {
		return "", "", runtimechain.Business("path is required")
	}
	if !strings.HasPrefix(p, "/") {
		return "", "", runtimechain.Business("path %q must be absolute, e.g. /mnt/user-data/workspace/notes.md", p)
	}
	clean = path.Clean(p)
	if !strings.HasPrefix(clean+"/", userDataRoot) {
		return "", "", runtimechain.Business("path %q is outside /mnt/user-data", p)
	}
	rel = strings.TrimPrefix(clean, userDataRoot)
	if clean+"/" == userDataRoot {
		rel = "."
	}
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "workspace", "outputs":
	case "uploads", ".":
		if writable {
			return "", "", runtimechain.Business("path %q is read-only; write under /mnt/user-data/workspace or /mnt/user-data/outputs", p)
		}
	default:
		return "", "", runtimechain.Business("path %q is outside /mnt/user-data/{workspace,outputs,uploads}", p)
	}
	return clean, rel, nil
}

// Root opens the thread's user-data folder as an os.Root.
func (w *Workspace) Root(threadID string) (*os.Root, error) {
	dir := filepath.Join(w.ThreadDir(threadID), "user-data")
	for _, d := range WorkspaceDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	return os.OpenRoot(dir)
}

func fsErr(vpath string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return runtimechain.Business("%s does not exist", vpath)
	case strings.Contains(err.Error(), "path escapes from parent"):
		return runtimechain.Business("%s resolves outside the thread's files (symlink refused)", vpath)
	case errors.Is(err, fs.ErrPermission):
		return runtimechain.Business("%s: permission denied", vpath)
	}
	return runtimechain.Business("%s: %v", vpath, unwrapPathErr(err))
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// CurrentDigest returns the SHA-256 of a workspace file, "" when it does not
// exist (read-before-write fails open then, docs/deerflow.md §6.2).
func (w *Workspace) CurrentDigest(threadID, vpath string) (string, error) {
	_, rel, err := CleanVirtual(vpath, true)
	if err != nil {
		return "", err
	}
	r, err := w.Root(threadID)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := r.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return digest(b), nil
}

func intArg(args map[string]any, key string) (int, bool) {
	v, ok := args[key]
	if !ok || v == nil {
		return 0, false
	}
	f, ok := v.(float64)
	if !ok {
		return 0, false
	}
	return int(f), true
}

func strArg(args map[string]any, key string) string {
	v, _ := args[key].(string)
	return v
}

// readRange is read_file's page: lines Start..End (1-based, inclusive),
// the first of them from character Char (0-based, in Unicode code points,
// so a page never starts inside a UTF-8 sequence). start_line/end_line keep
// DeerFlow's meaning; start_char is Toolplane's, for lines longer than a
// page (docs/deerflow.md §6.2). The output budget's pager
// (runtimechain.capExempt) writes the hint that continues a cut page.
type readRange struct {
	Start, End, Char int
	HasStart, HasEnd bool
}

// rangeArgs reads start_line, end_line and start_char.
func rangeArgs(args map[string]any) (readRange, error) {
	var r readRange
	r.Start, r.HasStart = intArg(args, "start_line")
	r.End, r.HasEnd = intArg(args, "end_line")
	if v, ok := args["start_char"]; ok && v != nil {
		f, isNum := v.(float64)
		if !isNum || f < 0 || f != float64(int(f)) {
			return r, runtimechain.Business("start_char must be an integer >= 0 (a character offset within start_line), got %v", v)
		}
		r.Char = int(f)
	}
	return r, nil
}

// sliceLines returns the page r of text. It scans for line ends instead of
// splitting, so a page of a 20 MiB file costs one pass over its bytes.
func sliceLines(text string, r readRange) (string, error) {
	if !r.HasStart && !r.HasEnd && r.Char == 0 {
		return text, nil
	}
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	start, end := r.Start, r.End
	if !r.HasStart {
		start = 1
	}
	if !r.HasEnd || end > n {
		end = n
	}
	if start < 1 || start > max(n, 1) || (r.HasEnd && r.End < start) {
		return "", runtimechain.Business("line range %d-%d is outside the file (%d lines)", start, end, n)
	}
	off := 0
	for l := 1; l < start; l++ {
		off += strings.IndexByte(text[off:], '\n') + 1
	}
	stop := len(text)
	if end < n {
		stop = off
		for l := start; l <= end; l++ {
			stop += strings.IndexByte(text[stop:], '\n') + 1
		}
	}
	if r.Char > 0 {
		line := text[off:stop]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		skip, k := 0, 0
		for k < r.Char && skip < len(line) {
			_, sz := utf8.DecodeRuneInString(line[skip:])
			skip += sz
			k++
		}
		if skip >= len(line) {
			return "", runtimechain.Business("start_char %d is past the end of line %d (%d characters, counting its newline)", r.Char, start, utf8.RuneCountInString(line))
		}
		off += skip
	}
	return text[off:stop], nil
}

// pageCap keeps the first ReadPageChars+1 characters of a read: enough for
// the output budget to see the read is over it and cut the page there.
func (s *Dispatcher) pageCap(text string) string {
	n := s.cfg.ReadPageChars
	if n <= 0 || len(text) <= n {
		return text
	}
	i, k := 0, 0
	for i < len(text) && k <= n {
		_, sz := utf8.DecodeRuneInString(text[i:])
		i += sz
		k++
	}
	return text[:i]
}

// readFile implements read_file. For workspace files it records the read
// mark; for /mnt/skills/... it reads through skills ReadSkillFile, and
// reading a SKILL.md activates the skill (docs/deerflow.md §4.8).
func (s *Dispatcher) readFile(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	p := strArg(args, "path")
	rg, err := rangeArgs(args)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(path.Clean(p)+"/", skillsRoot) {
		return s.readSkillFile(ctx, ec, path.Clean(p), rg)
	}
	if clean, rel, ok := acpRel(p); ok {
		return s.readACPFile(ec.ThreadID(), clean, rel, rg)
	}
	clean, rel, err := CleanVirtual(p, false)
	if err != nil {
		return nil, err
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	if st.IsDir() {
		return nil, runtimechain.Business("%s is a directory; use ls", clean)
	}
	b, err := r.ReadFile(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	text, err := sliceLines(string(b), rg)
	if err != nil {
		return nil, err
	}
	text = s.pageCap(text)
	return &runtimechain.Outcome{Text: text, ReadMark: &runtimechain.ReadMark{Path: clean, Digest: digest(b)}}, nil
}

func (s *Dispatcher) readSkillFile(ctx context.Context, ec *runtimechain.Call, clean string, rg readRange) (*runtimechain.Outcome, error) {
	parts := strings.SplitN(strings.TrimPrefix(clean, skillsRoot), "/", 3)
	if len(parts) < 3 || parts[2] == "" {
		return nil, runtimechain.Business("skill paths look like /mnt/skills/<category>/<name>/<file>, got %s", clean)
	}
	category, name, rel := parts[0], parts[1], parts[2]
	sk, answer := s.assembly.SkillAccess(ctx, ec.Thread, ec.View.Base, name)
	if answer != "" {
		return nil, runtimechain.Business("%s", answer)
	}
	if category != runtimeassembly.CategoryName(sk.GetCategory()) {
		return nil, runtimechain.Business("%s does not exist (skill %s is in /mnt/skills/%s/)", clean, name, runtimeassembly.CategoryName(sk.GetCategory()))
	}
	resp, err := s.skills.ReadSkillFile(runtimeident.ActingFor(ctx), &skillsv1.ReadSkillFileRequest{Name: name, Path: rel})
	if err != nil {
		return nil, runtimechain.UpstreamFailure("skills", err)
	}
	text, err := sliceLines(string(resp.GetContent()), rg)
	if err != nil {
		return nil, err
	}
	text = s.pageCap(text)
	o := &runtimechain.Outcome{Text: text}
	if rel == "SKILL.md" && !strings.HasPrefix(text, "Error:") {
		o.Activate = &runtimev1.ActiveSkill{Source: runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_READ, Name: name, Path: clean,
			Digest: runtimeassembly.FirstNonEmpty(resp.GetSkillDigest(), sk.GetDigest()), Time: timestamppb.New(s.now())}
	}
	return o, nil
}

// writeFile implements write_file (the read-before-write gate runs before).
func (s *Dispatcher) writeFile(_ context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	clean, rel, err := CleanVirtual(strArg(args, "path"), true)
	if err != nil {
		return nil, err
	}
	content, ok := args["content"].(string)
	if !ok {
		return nil, runtimechain.Business("content must be a string")
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o700); err != nil {
			return nil, fsErr(clean, err)
		}
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	size := int64(len(content))
	defer s.ws.reserve(ec.Thread.Proto.GetThreadId())()
	if appendMode, _ := args["append"].(bool); appendMode {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		if fi, err := r.Stat(rel); err == nil {
			size += fi.Size()
		}
	}
	if err := s.checkWrite(r, rel, clean, size); err != nil {
		return nil, err
	}
	f, err := r.OpenFile(rel, flag, 0o600)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	_, werr := f.WriteString(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fsErr(clean, werr)
	}
	return &runtimechain.Outcome{Text: fmt.Sprintf("OK: wrote %d bytes to %s", len(content), clean)}, nil
}

// checkWrite applies runtime.limits.workspace to a write that leaves the
// file rel with size bytes: the file bound, then the thread's quota (the
// bytes under /mnt/user-data with this file at its new size). Both refuse
// before anything is written, with a BUSINESS error naming the key.
func (s *Dispatcher) checkWrite(r *os.Root, rel, clean string, size int64) error {
	if m := s.cfg.FileMaxBytes; m > 0 && size > m {
		return runtimechain.Business("writing %s would make it %d bytes, over runtime.limits.workspace.file_max_bytes (%d bytes); write less", clean, size, m)
	}
	q := s.cfg.ThreadQuotaBytes
	if q <= 0 {
		return nil
	}
	used, err := usedBytes(r, rel)
	if err != nil {
		return err
	}
	if used+size > q {
		return runtimechain.Business("writing %s would bring this thread's files to %d bytes, over runtime.limits.workspace.thread_quota_bytes (%d bytes); delete or shorten files first", clean, used+size, q)
	}
	return nil
}

// usedBytes is the size of the files under r except the file rel.
func usedBytes(r *os.Root, rel string) (int64, error) {
	var used int64
	err := fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == rel {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			used += fi.Size()
		}
		return nil
	})
	return used, err
}

// strReplace implements str_replace.
func (s *Dispatcher) strReplace(_ context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	clean, rel, err := CleanVirtual(strArg(args, "path"), true)
	if err != nil {
		return nil, err
	}
	oldStr, newStr := strArg(args, "old_str"), strArg(args, "new_str")
	if oldStr == "" {
		return nil, runtimechain.Business("old_str must not be empty")
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer s.ws.reserve(ec.Thread.Proto.GetThreadId())()
	b, err := r.ReadFile(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	n := strings.Count(string(b), oldStr)
	all, _ := args["replace_all"].(bool)
	switch {
	case n == 0:
		return nil, runtimechain.Business("old_str was not found in %s", clean)
	case n > 1 && !all:
		return nil, runtimechain.Business("old_str occurs %d times in %s; make it unique or set replace_all", n, clean)
	}
	// The result's size is known before it is built: refuse an
	// over-quota replacement without allocating it.
	size := int64(len(b)) + int64(len(newStr)-len(oldStr))*int64(map[bool]int{true: n, false: 1}[all])
	if err := s.checkWrite(r, rel, clean, size); err != nil {
		return nil, err
	}
	out := strings.Replace(string(b), oldStr, newStr, map[bool]int{true: -1, false: 1}[all])
	if err := r.WriteFile(rel, []byte(out), 0o600); err != nil {
		return nil, fsErr(clean, err)
	}
	return &runtimechain.Outcome{Text: fmt.Sprintf("OK: replaced %d occurrence(s) in %s", map[bool]int{true: n, false: 1}[all], clean)}, nil
}

// ls implements ls.
func (s *Dispatcher) ls(_ context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	p := strArg(args, "path")
	if p == "" {
		p = "/mnt/user-data"
	}
	if clean, rel, ok := acpRel(p); ok {
		return s.lsACP(ec.ThreadID(), clean, rel)
	}
	clean, rel, err := CleanVirtual(p, false)
	if err != nil {
		return nil, err
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	var sb strings.Builder
	for _, e := range ents {
		sb.WriteString(path.Join(clean, e.Name()))
		if e.IsDir() {
			sb.WriteString("/")
		}
		sb.WriteByte('\n')
	}
	if sb.Len() == 0 {
		return &runtimechain.Outcome{Text: "(empty directory)"}, nil
	}
	return &runtimechain.Outcome{Text: strings.TrimRight(sb.String(), "\n")}, nil
}

// bash implements the bash config tool (bound only with runtime.allow_bash).
// The command runs in the thread's workspace with a bounded time and output.
func (s *Dispatcher) bash(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	if !s.cfg.AllowBash {
		return nil, runtimechain.Business("host bash is disabled (runtime.allow_bash is false)")
	}
	cmdline := strArg(args, "command")
	if strings.TrimSpace(cmdline) == "" || len(cmdline) > 10000 || strings.ContainsRune(cmdline, 0) {
		return nil, runtimechain.Business("command must be 1..10000 characters without NUL")
	}
	dir := filepath.Join(s.ws.ThreadDir(ec.Thread.Proto.GetThreadId()), "user-data", "workspace")
	cctx, cancel := context.WithTimeout(ctx, min(s.cfg.ToolCallTimeout, 10*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", cmdline)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	text := strings.ReplaceAll(string(out), filepath.Join(s.ws.ThreadDir(ec.Thread.Proto.GetThreadId()), "user-data")+"/", userDataRoot)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, runtimechain.Business("command exited with status %d:\n%s", ee.ExitCode(), text)
		}
		return nil, err
	}
	return &runtimechain.Outcome{Text: text}, nil
}

// presentFiles implements present_files: existing files under outputs
// become thread artifacts.
func (s *Dispatcher) presentFiles(_ context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	raw, _ := args["filepaths"].([]any)
	if len(raw) == 0 {
		return nil, runtimechain.Business("filepaths must be a non-empty list of paths under /mnt/user-data/outputs")
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	o := &runtimechain.Outcome{}
	var shown []string
	for _, x := range raw {
		p, _ := x.(string)
		clean, rel, err := CleanVirtual(p, true)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(clean, outputsRoot) {
			return nil, runtimechain.Business("only files under /mnt/user-data/outputs can be presented, got %s", clean)
		}
		st, err := r.Stat(rel)
		if err != nil {
			return nil, fsErr(clean, err)
		}
		if st.IsDir() {
			return nil, runtimechain.Business("%s is a directory", clean)
		}
		o.Artifacts = append(o.Artifacts, &runtimev1.Artifact{Path: clean, Size: st.Size(), MimeType: mimeOf(clean), ToolCallId: ec.CallID})
		shown = append(shown, clean)
	}
	o.Text = "Presented: " + strings.Join(shown, ", ")
	return o, nil
}

func mimeOf(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".md":
		return "text/markdown"
	case ".txt", ".log":
		return "text/plain"
	case ".json":
		return "application/json"
	case ".html":
		return "text/html"
	case ".csv":
		return "text/csv"
	case ".png":
		return "image/png"
	case ".pdf":
		return "application/pdf"
	}
	return ""
}

// SaveResult writes text to /mnt/user-data/outputs/.tool-results/<prefix>-<12 hex><ext>.
func (w *Workspace) SaveResult(threadID, callID, prefix, ext, text string) (*runtimev1.Artifact, error) {
	sum := sha256.Sum256([]byte(callID + "\x00" + text))
	rel := "outputs/.tool-results/" + prefix + "-" + hex.EncodeToString(sum[:])[:12] + ext
	r, err := w.Root(threadID)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.MkdirAll("outputs/.tool-results", 0o700); err != nil {
		return nil, err
	}
	// Saved results count against the thread's quota like the file tools'
	// writes (one reservation with them): over it, nothing is saved and the
	// caller says the output could not be saved.
	if q := w.quota.Load(); q > 0 {
		defer w.reserve(threadID)()
		used, err := usedBytes(r, rel)
		if err != nil {
			return nil, err
		}
		if used+int64(len(text)) > q {
			return nil, fmt.Errorf("saving the output would bring this thread's files over runtime.limits.workspace.thread_quota_bytes (%d bytes)", q)
		}
	}
	if err := r.WriteFile(rel, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return &runtimev1.Artifact{Path: userDataRoot + rel, Size: int64(len(text)), MimeType: mimeOf(rel), ToolCallId: callID}, nil
}
