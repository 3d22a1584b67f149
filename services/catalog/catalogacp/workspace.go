package catalogacp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// threadIDRE is the syntax of a runtime thread id as a folder name (the
// runtime issues UUIDs; nothing with a separator or a dot is accepted).
var threadIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ACPWorkspaceDir is the folder of a thread that ACP agents work in,
// beside its user-data folder; the runtime shows it to the lead agent as
// /mnt/acp-workspace/.
const ACPWorkspaceDir = "acp-workspace"

// ErrNoThreadWorkspace reports a thread folder the catalog cannot see: no
// trusted thread id, or a split deployment whose catalog does not mount
// the runtime's volume (catalog.workspaces.dir).
var ErrNoThreadWorkspace = errors.New("thread workspace not found on the catalog's volume (set catalog.workspaces.dir to the runtime's threads folder)")

// ThreadACPDir returns <threads>/<thread id>/acp-workspace, creating the
// last folder (0700) when the thread's folder exists. The catalog never
// creates a thread folder: the runtime does
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md). Symbolic
// links are refused at both levels, so the agent never runs outside the
// thread's folder.
func ThreadACPDir(threads, threadID string) (string, error) {
	if !threadIDRE.MatchString(threadID) {
		return "", fmt.Errorf("%w: thread id is missing or malformed", ErrNoThreadWorkspace)
	}
	r, err := os.OpenRoot(threads)
	if err != nil {
		return "", ErrNoThreadWorkspace
	}
	defer r.Close()
	st, err := r.Lstat(threadID)
	if err != nil || !st.IsDir() {
		return "", ErrNoThreadWorkspace
	}
	rel := filepath.Join(threadID, ACPWorkspaceDir)
	if err := r.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create the ACP workspace: %w", err)
	}
	st, err = r.Lstat(rel)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("the ACP workspace of thread %s is not a folder (a link is refused)", threadID)
	}
	return filepath.Join(threads, rel), nil
}
