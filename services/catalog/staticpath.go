package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// staticDirs returns the directories a static server written through the
// API may read from (catalog.static_dirs; default the directory of
// extensions_config), absolute with symlinks resolved.
func (s *Server) staticDirs() []string {
	dirs := s.cfg.StaticDirs
	if len(dirs) == 0 {
		dirs = []string{filepath.Dir(s.cfg.ExtensionsConfig)}
	}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
		out = append(out, abs)
	}
	return out
}

// checkStaticPath refuses a static server, written through the API, whose
// path is outside catalog.static_dirs: the path is made absolute and every
// symlink in it resolved before the containment check, so neither `..` nor
// a link leaving the directory reaches another file (other threads'
// workspaces, the suite's databases, /etc). A `${VAR}` in the path is
// refused too: its value is the suite's environment, not the writer's.
// The text names the field and the reason, never the file's content. A
// path equal to the stored one (prev, e.g. enabling a server of the file)
// is the operator's and kept.
func (s *Server) checkStaticPath(srv, prev *catalogconfig.Server) error {
	if srv.EffectiveType() != catalogconfig.TypeStatic {
		return nil
	}
	if prev != nil && prev.EffectiveType() == catalogconfig.TypeStatic && prev.Path == srv.Path {
		return nil
	}
	field := "mcpServers." + srv.Name + ".path"
	if strings.Contains(srv.Path, "$") {
		return fmt.Errorf("%s: `$` is refused in a static path written through the API (a variable would read the suite's environment)", field)
	}
	abs, err := filepath.Abs(srv.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	dirs := s.staticDirs()
	outside := fmt.Errorf("%s: %s is outside catalog.static_dirs (%s)", field, srv.Path, strings.Join(dirs, ", "))
	// Lexically first, so a path outside is refused the same way whether
	// or not it exists (no probing of the host's files).
	if !within(dirs, abs) {
		return outside
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("%s: %s cannot be read", field, srv.Path)
	}
	if !within(dirs, real) {
		return outside
	}
	// The data dir holds the suite's databases, tokens and every thread's
	// workspace: never a static catalog unless static_dirs names a folder
	// inside it on purpose (the default directory may contain it).
	if d := s.dataDirReal(); d != "" && within([]string{d}, real) && !s.explicitInside(d, real) {
		return fmt.Errorf("%s: %s is inside the data dir (server.data_dir); list a folder of it in catalog.static_dirs to allow it", field, srv.Path)
	}
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %s is not a regular file", field, srv.Path)
	}
	return nil
}

func (s *Server) dataDirReal() string {
	if s.env.DataDir == "" {
		return ""
	}
	abs, err := filepath.Abs(s.env.DataDir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// explicitInside: real is inside a configured static dir that is itself
// inside (or is) the data dir d.
func (s *Server) explicitInside(d, real string) bool {
	if len(s.cfg.StaticDirs) == 0 {
		return false
	}
	for _, sd := range s.staticDirs() {
		if within([]string{d}, sd) && within([]string{sd}, real) {
			return true
		}
	}
	return false
}

// within reports whether the absolute path p is inside one of dirs.
func within(dirs []string, p string) bool {
	for _, d := range dirs {
		if rel, err := filepath.Rel(d, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
