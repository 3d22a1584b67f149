package runtime

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
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// Virtual file system of a thread (deerflow-reference §6.2 ThreadData):
// /mnt/user-data/{workspace,outputs,uploads} map to
// <data dir>/runtime/threads/<id>/user-data/...; /mnt/skills/<category>/<name>/...
// is read through the skills service. Every access goes through os.Root,
// so neither `..` nor a symlink can leave the thread's folder.
const (
	userDataRoot = "/mnt/user-data/"
	skillsRoot   = "/mnt/skills/"
	outputsRoot  = "/mnt/user-data/outputs/"
)

// errBusiness is a tool-level failure reported to the model as `Error: ...`.
type errBusiness struct{ msg string }

// Error returns the message.
func (e *errBusiness) Error() string { return e.msg }

func business(format string, args ...any) error {
	return &errBusiness{msg: fmt.Sprintf(format, args...)}
}

// cleanVirtual validates and cleans a virtual path; it returns the path
// relative to the user-data root ("workspace/a.txt").
func cleanVirtual(p string, writable bool) (clean, rel string, err error) {
	if p == "" {
		return "", "", business("path is required")
	}
	if !strings.HasPrefix(p, "/") {
		return "", "", business("path %q must be absolute, e.g. /mnt/user-data/workspace/notes.md", p)
	}
	clean = path.Clean(p)
	if !strings.HasPrefix(clean+"/", userDataRoot) {
		return "", "", business("path %q is outside /mnt/user-data", p)
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
			return "", "", business("path %q is read-only; write under /mnt/user-data/workspace or /mnt/user-data/outputs", p)
		}
	default:
		return "", "", business("path %q is outside /mnt/user-data/{workspace,outputs,uploads}", p)
	}
	return clean, rel, nil
}

// root opens the thread's user-data folder as an os.Root.
func (s *Server) root(threadID string) (*os.Root, error) {
	dir := filepath.Join(s.threadDir(threadID), "user-data")
	for _, d := range workspaceDirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	return os.OpenRoot(dir)
}

func fsErr(vpath string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return business("%s does not exist", vpath)
	case strings.Contains(err.Error(), "path escapes from parent"):
		return business("%s resolves outside the thread's files (symlink refused)", vpath)
	case errors.Is(err, fs.ErrPermission):
		return business("%s: permission denied", vpath)
	}
	return business("%s: %v", vpath, unwrapPathErr(err))
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

// currentDigest returns the SHA-256 of a workspace file, "" when it does not
// exist (read-before-write fails open then, deerflow-reference §6.2).
func (s *Server) currentDigest(threadID, vpath string) (string, error) {
	_, rel, err := cleanVirtual(vpath, true)
	if err != nil {
		return "", err
	}
	r, err := s.root(threadID)
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

// sliceLines returns lines start..end (1-based, inclusive) of text.
func sliceLines(text string, start, end int, hasStart, hasEnd bool) (string, error) {
	if !hasStart && !hasEnd {
		return text, nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if !hasStart {
		start = 1
	}
	if !hasEnd || end > len(lines) {
		end = len(lines)
	}
	if start < 1 || start > max(len(lines), 1) || end < start {
		return "", business("line range %d-%d is outside the file (%d lines)", start, end, len(lines))
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines[start-1:end], ""), nil
}

// readFile implements read_file. For workspace files it records the read
// mark; for /mnt/skills/... it reads through skills ReadSkillFile, and
// reading a SKILL.md activates the skill (deerflow-reference §4.8).
func (s *Server) readFile(ctx context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	p := strArg(args, "path")
	start, hasStart := intArg(args, "start_line")
	end, hasEnd := intArg(args, "end_line")
	if strings.HasPrefix(path.Clean(p)+"/", skillsRoot) {
		return s.readSkillFile(ctx, ec, path.Clean(p), start, end, hasStart, hasEnd)
	}
	clean, rel, err := cleanVirtual(p, false)
	if err != nil {
		return nil, err
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	if st.IsDir() {
		return nil, business("%s is a directory; use ls", clean)
	}
	b, err := r.ReadFile(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	text, err := sliceLines(string(b), start, end, hasStart, hasEnd)
	if err != nil {
		return nil, err
	}
	return &outcome{text: text, readMark: &readMark{path: clean, digest: digest(b)}}, nil
}

func (s *Server) readSkillFile(ctx context.Context, ec *execCtx, clean string, start, end int, hasStart, hasEnd bool) (*outcome, error) {
	parts := strings.SplitN(strings.TrimPrefix(clean, skillsRoot), "/", 3)
	if len(parts) < 3 || parts[2] == "" {
		return nil, business("skill paths look like /mnt/skills/<category>/<name>/<file>, got %s", clean)
	}
	category, name, rel := parts[0], parts[1], parts[2]
	sk, answer := s.skillAccess(ctx, ec.thread, ec.view.base, name)
	if answer != "" {
		return nil, business("%s", answer)
	}
	if category != categoryName(sk.GetCategory()) {
		return nil, business("%s does not exist (skill %s is in /mnt/skills/%s/)", clean, name, categoryName(sk.GetCategory()))
	}
	resp, err := s.skills.ReadSkillFile(actingFor(ctx), &skillsv1.ReadSkillFileRequest{Name: name, Path: rel})
	if err != nil {
		return nil, upstreamFailure("skills", err)
	}
	text, err := sliceLines(string(resp.GetContent()), start, end, hasStart, hasEnd)
	if err != nil {
		return nil, err
	}
	o := &outcome{text: text}
	if rel == "SKILL.md" && !strings.HasPrefix(text, "Error:") {
		o.activate = &runtimev1.ActiveSkill{Source: runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_READ, Name: name, Path: clean,
			Digest: firstNonEmpty(resp.GetSkillDigest(), sk.GetDigest()), Time: timestamppb.New(s.now())}
	}
	return o, nil
}

// writeFile implements write_file (the read-before-write gate runs before).
func (s *Server) writeFile(_ context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	clean, rel, err := cleanVirtual(strArg(args, "path"), true)
	if err != nil {
		return nil, err
	}
	content, ok := args["content"].(string)
	if !ok {
		return nil, business("content must be a string")
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
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
	if appendMode, _ := args["append"].(bool); appendMode {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
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
	return &outcome{text: fmt.Sprintf("OK: wrote %d bytes to %s", len(content), clean)}, nil
}

// strReplace implements str_replace.
func (s *Server) strReplace(_ context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	clean, rel, err := cleanVirtual(strArg(args, "path"), true)
	if err != nil {
		return nil, err
	}
	oldStr, newStr := strArg(args, "old_str"), strArg(args, "new_str")
	if oldStr == "" {
		return nil, business("old_str must not be empty")
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := r.ReadFile(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	n := strings.Count(string(b), oldStr)
	all, _ := args["replace_all"].(bool)
	switch {
	case n == 0:
		return nil, business("old_str was not found in %s", clean)
	case n > 1 && !all:
		return nil, business("old_str occurs %d times in %s; make it unique or set replace_all", n, clean)
	}
	out := strings.Replace(string(b), oldStr, newStr, map[bool]int{true: -1, false: 1}[all])
	if err := r.WriteFile(rel, []byte(out), 0o600); err != nil {
		return nil, fsErr(clean, err)
	}
	return &outcome{text: fmt.Sprintf("OK: replaced %d occurrence(s) in %s", map[bool]int{true: n, false: 1}[all], clean)}, nil
}

// ls implements ls.
func (s *Server) ls(_ context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	p := strArg(args, "path")
	if p == "" {
		p = "/mnt/user-data"
	}
	clean, rel, err := cleanVirtual(p, false)
	if err != nil {
		return nil, err
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
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
		return &outcome{text: "(empty directory)"}, nil
	}
	return &outcome{text: strings.TrimRight(sb.String(), "\n")}, nil
}

// bash implements the bash config tool (bound only with runtime.allow_bash).
// The command runs in the thread's workspace with a bounded time and output.
func (s *Server) bash(ctx context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	if !s.cfg.AllowBash {
		return nil, business("host bash is disabled (runtime.allow_bash is false)")
	}
	cmdline := strArg(args, "command")
	if strings.TrimSpace(cmdline) == "" || len(cmdline) > 10000 || strings.ContainsRune(cmdline, 0) {
		return nil, business("command must be 1..10000 characters without NUL")
	}
	dir := filepath.Join(s.threadDir(ec.thread.Proto.GetThreadId()), "user-data", "workspace")
	cctx, cancel := context.WithTimeout(ctx, min(s.cfg.ToolCallTimeout, 10*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", cmdline)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	text := strings.ReplaceAll(string(out), filepath.Join(s.threadDir(ec.thread.Proto.GetThreadId()), "user-data")+"/", userDataRoot)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, business("command exited with status %d:\n%s", ee.ExitCode(), text)
		}
		return nil, err
	}
	return &outcome{text: text}, nil
}

// presentFiles implements present_files: existing files under outputs
// become thread artifacts.
func (s *Server) presentFiles(_ context.Context, ec *execCtx, args map[string]any) (*outcome, error) {
	raw, _ := args["filepaths"].([]any)
	if len(raw) == 0 {
		return nil, business("filepaths must be a non-empty list of paths under /mnt/user-data/outputs")
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	o := &outcome{}
	var shown []string
	for _, x := range raw {
		p, _ := x.(string)
		clean, rel, err := cleanVirtual(p, true)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(clean, outputsRoot) {
			return nil, business("only files under /mnt/user-data/outputs can be presented, got %s", clean)
		}
		st, err := r.Stat(rel)
		if err != nil {
			return nil, fsErr(clean, err)
		}
		if st.IsDir() {
			return nil, business("%s is a directory", clean)
		}
		o.artifacts = append(o.artifacts, &runtimev1.Artifact{Path: clean, Size: st.Size(), MimeType: mimeOf(clean), ToolCallId: ec.callID})
		shown = append(shown, clean)
	}
	o.text = "Presented: " + strings.Join(shown, ", ")
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
