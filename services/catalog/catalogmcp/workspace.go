package catalogmcp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// ErrNoThreadWorkspace reports a workspace-bound call (working_dir: thread)
// without a thread folder the catalog can see: no trusted thread id, or a
// split deployment whose catalog does not mount the runtime's volume
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
var ErrNoThreadWorkspace = errors.New("thread workspace not found on the catalog's volume (set catalog.workspaces.dir to the runtime's threads folder)")

// threadIDRE is the syntax of a runtime thread id as a folder name.
var threadIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// threadWorkDir points a workspace-bound server's child at
// <ThreadsDir>/<thread>/user-data/workspace (Call sets the child's Cwd to it) and returns
// the folder for the call's result; nil for other servers. The catalog
// never creates a thread folder (the runtime does), and every level is
// checked through os.Root with Lstat, so a symbolic link anywhere on the
// way is refused and the child never runs outside the thread's folder.
func (m *Manager) threadWorkDir(cfg *catalogconfig.Server, key ScopeKey) (*WorkDir, error) {
	if cfg.WorkingDir != catalogconfig.WorkingDirThread {
		return nil, nil
	}
	threads := m.opts.ThreadsDir
	if threads == "" {
		return nil, fmt.Errorf("%w: catalog.workspaces.dir is not set", ErrNoThreadWorkspace)
	}
	if !threadIDRE.MatchString(key.Thread) {
		return nil, fmt.Errorf("%w: the call has no trusted thread id (call_context.thread_id from a service credential)", ErrNoThreadWorkspace)
	}
	r, err := os.OpenRoot(threads)
	if err != nil {
		return nil, ErrNoThreadWorkspace
	}
	defer r.Close()
	rel := key.Thread
	for _, part := range []string{"", "user-data", "workspace"} {
		rel = filepath.Join(rel, part)
		st, err := r.Lstat(rel)
		if err != nil || !st.IsDir() {
			return nil, ErrNoThreadWorkspace
		}
	}
	dir := filepath.Join(threads, rel)
	cfg.Cwd = dir
	return &WorkDir{Path: dir, UserDataRoot: filepath.Dir(dir)}, nil
}
