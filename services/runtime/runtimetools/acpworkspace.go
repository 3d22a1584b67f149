package runtimetools

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// acpRoot is the thread's ACP workspace as the lead agent sees it: the
// folder <thread>/acp-workspace the catalog runs ACP agents in, read-only
// to the file tools (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
const acpRoot = "/mnt/acp-workspace/"

// acpRel returns the path relative to the ACP workspace when p is under
// /mnt/acp-workspace ("." for the folder itself).
func acpRel(p string) (clean, rel string, ok bool) {
	if !strings.HasPrefix(p, "/") {
		return "", "", false
	}
	clean = path.Clean(p)
	switch {
	case clean+"/" == acpRoot:
		return clean, ".", true
	case strings.HasPrefix(clean, acpRoot):
		return clean, strings.TrimPrefix(clean, acpRoot), true
	}
	return "", "", false
}

// acpWorkspace opens the thread's ACP workspace through os.Root; it does
// not exist until an ACP agent ran in the thread.
func (w *Workspace) acpWorkspace(threadID string) (*os.Root, error) {
	r, err := os.OpenRoot(filepath.Join(w.ThreadDir(threadID), "acp-workspace"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, runtimechain.Business("/mnt/acp-workspace is empty: no ACP agent has run in this thread yet")
	}
	return r, err
}

// readACPFile is read_file under /mnt/acp-workspace (no read mark: the
// folder is read-only to the file tools).
func (s *Dispatcher) readACPFile(threadID, clean, rel string, rg readRange) (*runtimechain.Outcome, error) {
	r, err := s.ws.acpWorkspace(threadID)
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
	return &runtimechain.Outcome{Text: s.pageCap(text)}, nil
}

// lsACP is ls under /mnt/acp-workspace.
func (s *Dispatcher) lsACP(threadID, clean, rel string) (*runtimechain.Outcome, error) {
	r, err := s.ws.acpWorkspace(threadID)
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
