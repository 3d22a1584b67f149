package runtimetools

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// Path translation of MCP results (docs/deerflow.md §5.8;
// docs/decisions/0150-where-acp-and-workspace-servers-run.md): a stdio
// server with `working_dir: thread` runs in the thread's workspace, and the
// catalog reports where (CallToolResponse.working_directory, catalog-side
// paths). Local references in the result's text — absolute paths, file://
// URIs, paths relative to the server's working directory — that resolve to
// an existing file or folder of the thread's user-data tree are rewritten
// to /mnt/user-data/...; a bare file name only when exactly one file of
// that name was created or modified by the call (a bounded snapshot diff of
// workspace/ and outputs/). Everything else is left as the server wrote it,
// and the catalog-side path never reaches the model.

// Snapshot bounds (per walk): a walk that hits one is discarded, and bare
// names are then left alone.
const (
	snapshotMaxEntries = 5000
	snapshotMaxDepth   = 12
	snapshotMaxTime    = time.Second
	// maxLookups bounds the file-system checks of one result (a result of
	// megabytes of path-like tokens must not cost a stat each); later
	// references are left as written.
	maxLookups = 2000
)

// fileStamp is what the snapshot diff compares.
type fileStamp struct {
	size int64
	mod  time.Time
}

// snapshot maps user-data-relative paths of regular files to their stamp.
type snapshot map[string]fileStamp

// snapshotThread walks user-data/workspace and user-data/outputs of a
// thread through os.Root (symbolic links are not followed); nil when a
// bound was hit or the folder cannot be read.
func (w *Workspace) snapshotThread(threadID string) snapshot {
	r, err := w.Root(threadID)
	if err != nil {
		return nil
	}
	defer r.Close()
	snap := snapshot{}
	deadline := time.Now().Add(snapshotMaxTime)
	errBound := errors.New("bound")
	n := 0
	for _, top := range []string{"workspace", "outputs"} {
		err := fs.WalkDir(r.FS(), top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > snapshotMaxEntries || time.Now().After(deadline) {
				return errBound
			}
			if d.IsDir() {
				if strings.Count(p, "/") >= snapshotMaxDepth {
					return errBound
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil // removed during the walk
			}
			snap[p] = fileStamp{info.Size(), info.ModTime()}
			return nil
		})
		if err != nil {
			return nil
		}
	}
	return snap
}

// changedByBase returns, for each base name, how many files of that name
// were created or modified between before and after.
func changedByBase(before, after snapshot) map[string][]string {
	out := map[string][]string{}
	for p, st := range after {
		if old, ok := before[p]; ok && old == st {
			continue
		}
		b := path.Base(p)
		out[b] = append(out[b], p)
	}
	return out
}

// pathTranslator rewrites the local references of one result.
type pathTranslator struct {
	wd      string // catalog-side working directory
	root    string // catalog-side user-data folder
	local   *os.Root
	changed map[string][]string // nil: bare names are not rewritten
	lookups int
}

// stat checks rel on the runtime's side, within the lookup budget.
func (t *pathTranslator) stat(rel string) bool {
	if t.lookups >= maxLookups {
		return false
	}
	t.lookups++
	_, err := t.local.Stat(rel)
	return err == nil
}

// refTrim are the characters stripped from a candidate's ends (quotes,
// brackets and sentence punctuation around a path).
const refTrim = "\"'`()[]{}<>,;:!?"

// rewriteText rewrites every whitespace-separated reference in s.
func (t *pathTranslator) rewriteText(s string) string {
	var sb strings.Builder
	changed := false
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		if j > i {
			tok := s[i:j]
			lead := len(tok) - len(strings.TrimLeft(tok, refTrim))
			core := strings.TrimRight(tok[lead:], refTrim+".")
			if core != "" {
				if v, ok := t.resolve(core); ok {
					sb.WriteString(tok[:lead])
					sb.WriteString(v)
					sb.WriteString(tok[lead+len(core):])
					changed = true
					i = j
					continue
				}
			}
			sb.WriteString(tok)
		}
		k := j
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		sb.WriteString(s[j:k])
		i = k
	}
	if !changed {
		return s
	}
	return sb.String()
}

// resolve maps one reference to its virtual path.
func (t *pathTranslator) resolve(ref string) (string, bool) {
	if strings.HasPrefix(ref, userDataRoot) || ref == "/mnt/user-data" {
		return "", false // already virtual
	}
	var abs string
	switch {
	case strings.HasPrefix(ref, "file://"):
		u, err := url.Parse(ref)
		if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return "", false
		}
		abs = u.Path
	case strings.HasPrefix(ref, "/"):
		abs = ref
	case strings.Contains(ref, "://"):
		return "", false // another scheme (http, s3, ...)
	case strings.Contains(ref, "/") || ref == "." || ref == "..":
		abs = filepath.Join(t.wd, ref)
	default:
		return t.resolveBare(ref)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(t.root, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	top, _, _ := strings.Cut(rel, "/")
	if top != "workspace" && top != "outputs" && top != "uploads" {
		return "", false
	}
	if !t.stat(rel) {
		return "", false // not there on the runtime's side (or outside through a link)
	}
	return userDataRoot + filepath.ToSlash(rel), true
}

// resolveBare maps a bare file name to the one file of that name the call
// created or modified.
func (t *pathTranslator) resolveBare(name string) (string, bool) {
	if t.changed == nil {
		return "", false
	}
	ps := t.changed[name]
	if len(ps) != 1 {
		return "", false
	}
	if !t.stat(ps[0]) {
		return "", false
	}
	return userDataRoot + ps[0], true
}

// translatePaths rewrites the text blocks and resource URIs of a
// workspace-bound server's result. before is the snapshot taken before
// the call (nil: bare names are left alone).
func (w *Workspace) translatePaths(threadID string, wd *catalogv1.WorkingDirectory, before snapshot, content []*typev1.ContentBlock) []*typev1.ContentBlock {
	if wd.GetPath() == "" || wd.GetUserDataRoot() == "" || len(content) == 0 {
		return content
	}
	r, err := w.Root(threadID)
	if err != nil {
		return content
	}
	defer r.Close()
	t := &pathTranslator{wd: filepath.Clean(wd.GetPath()), root: filepath.Clean(wd.GetUserDataRoot()), local: r}
	if before != nil {
		if after := w.snapshotThread(threadID); after != nil {
			t.changed = changedByBase(before, after)
		}
	}
	out := make([]*typev1.ContentBlock, len(content))
	for i, b := range content {
		out[i] = b
		switch b.GetType() {
		case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT:
			if nt := t.rewriteText(b.GetText()); nt != b.GetText() {
				c := cloneBlock(b)
				c.Text = nt
				out[i] = c
			}
		case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE_LINK, typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE:
			if v, ok := t.resolve(b.GetUri()); ok && strings.HasPrefix(b.GetUri(), "file://") {
				c := cloneBlock(b)
				c.Uri = "file://" + v
				if c.GetText() != "" {
					c.Text = t.rewriteText(c.GetText())
				}
				out[i] = c
			}
		}
	}
	return out
}

func cloneBlock(b *typev1.ContentBlock) *typev1.ContentBlock {
	return proto.Clone(b).(*typev1.ContentBlock)
}

// boundTTL is how long the runtime trusts what it learned about a
// server's working_dir (a reconfigured server is seen within it).
const boundTTL = 30 * time.Second

type boundEntry struct {
	bound bool
	at    time.Time
}

// serverGetter is the catalog's GetServer (the generated client has it).
type serverGetter interface {
	GetServer(ctx context.Context, in *catalogv1.GetServerRequest, opts ...grpc.CallOption) (*catalogv1.GetServerResponse, error)
}

// workspaceBound reports whether server runs its children in the thread's
// workspace (`working_dir: thread`): from the last answer about it within
// boundTTL, else from catalog GetServer (a failure counts as no, and is
// asked again on the next call; the call's own answer still decides the
// rewriting).
func (s *Dispatcher) workspaceBound(ctx context.Context, server string) bool {
	if v, ok := s.wsBound.Load(server); ok {
		if e := v.(boundEntry); s.now().Sub(e.at) < boundTTL {
			return e.bound
		}
	}
	g, ok := s.catalog.(serverGetter)
	if !ok || server == "" {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := g.GetServer(cctx, &catalogv1.GetServerRequest{Name: server})
	if err != nil {
		return false
	}
	b := resp.GetServer().GetConfig().GetWorkingDir() == "thread"
	s.wsBound.Store(server, boundEntry{b, s.now()})
	return b
}

// callWorkspaceAware runs a catalog call with the path translation of
// workspace-bound servers: for those a snapshot is taken before the call
// (for bare names); a call the catalog refuses because the thread folder
// does not exist yet is retried once after the runtime created it (the
// catalog never creates thread folders; nothing ran). The result's
// references are rewritten when the catalog reports a working directory.
func (s *Dispatcher) callWorkspaceAware(ctx context.Context, threadID, server string, call func(context.Context) (*catalogv1.CallToolResponse, error)) (*catalogv1.CallToolResponse, error) {
	var before snapshot
	if s.workspaceBound(ctx, server) {
		before = s.ws.snapshotThread(threadID)
	}
	resp, err := call(ctx)
	if err != nil && workspaceUnavailable(err) && before == nil {
		if r, rerr := s.ws.Root(threadID); rerr == nil {
			r.Close()
			before = s.ws.snapshotThread(threadID)
			resp, err = call(ctx)
		}
	}
	if err != nil {
		return nil, err
	}
	s.wsBound.Store(server, boundEntry{resp.GetWorkingDirectory() != nil, s.now()})
	if wd := resp.GetWorkingDirectory(); wd != nil {
		resp = proto.Clone(resp).(*catalogv1.CallToolResponse)
		resp.Content = s.ws.translatePaths(threadID, wd, before, resp.GetContent())
		resp.WorkingDirectory = nil // host paths never leave the runtime
	}
	return resp, nil
}

// workspaceUnavailable reports the catalog's answer to a workspace-bound
// call whose thread folder it cannot see (FAILED_PRECONDITION,
// ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE).
func workspaceUnavailable(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == catalogv1.ErrorReason_ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE.String() {
			return true
		}
	}
	return false
}
