package runtimetools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// Limits of the glob and grep tools of the file:read group
// (docs/deerflow.md §1.1: DeerFlow's defaults are max_results 200 for glob
// and 100 for grep). The walk bounds keep a call from dominating the turn
// on a large workspace.
const (
	GlobMaxResults = 200
	GrepMaxResults = 100
	// searchMaxEntries bounds the directory entries one call visits.
	searchMaxEntries = 50000
	// searchMaxTime bounds one call's walk (the call's own deadline, if
	// shorter, wins).
	searchMaxTime = 10 * time.Second
	// grepMaxFileBytes: larger files are skipped (and counted).
	grepMaxFileBytes = 1 << 20
	// grepMaxTotalBytes bounds the bytes one grep call reads.
	grepMaxTotalBytes = 64 << 20
	// grepMaxPattern bounds the regular expression's length.
	grepMaxPattern = 1000
	// grepMaxLine bounds a matching line as shown (runes).
	grepMaxLine = 300
	// maxPatternSegments bounds a glob pattern's depth.
	maxPatternSegments = 32
)

// searchScope resolves the `path` argument of glob and grep: a directory
// under /mnt/user-data (default /mnt/user-data itself). It returns the
// cleaned virtual directory and the path relative to the user-data root.
func searchScope(args map[string]any) (clean, rel string, err error) {
	p := strArg(args, "path")
	if p == "" {
		p = "/mnt/user-data"
	}
	return CleanVirtual(p, false)
}

// walkBudget counts visited entries and the elapsed time of one walk.
type walkBudget struct {
	ctx      context.Context
	deadline time.Time
	entries  int
	// stopped says why the walk ended early ("" = it did not).
	stopped string
}

func newWalkBudget(ctx context.Context, now time.Time) *walkBudget {
	d := now.Add(searchMaxTime)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return &walkBudget{ctx: ctx, deadline: d}
}

var errStopWalk = errors.New("stop walk")

// tick is called once per visited entry; it returns errStopWalk once a
// bound is hit.
func (b *walkBudget) tick() error {
	b.entries++
	switch {
	case b.entries > searchMaxEntries:
		b.stopped = fmt.Sprintf("the search visited %d entries and stopped; narrow the path", searchMaxEntries)
	case b.entries%256 == 0 && time.Now().After(b.deadline):
		b.stopped = "the search ran out of time and stopped; narrow the path"
	case b.ctx.Err() != nil:
		b.stopped = "the search was cancelled"
	default:
		return nil
	}
	return errStopWalk
}

// walkFiles walks the directory rel of r in lexical order without
// following symbolic links (fs.WalkDir over os.Root's FS: a link is an
// entry, never a directory to descend into, and reading through it is
// confined to the root). fn gets the path relative to the user-data root.
func walkFiles(r *os.Root, rel string, b *walkBudget, fn func(rel string, d fs.DirEntry) error) error {
	err := fs.WalkDir(r.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			// An unreadable folder below the start is skipped, not fatal.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err := b.tick(); err != nil {
			return err
		}
		if p == rel {
			return nil
		}
		return fn(p, d)
	})
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

// virtualOf maps a path relative to the user-data root to its virtual path.
func virtualOf(rel string) string {
	if rel == "." {
		return strings.TrimSuffix(userDataRoot, "/")
	}
	return userDataRoot + rel
}

// globPattern is a validated glob in doublestar syntax: * and ? within one
// path segment, ** for any number of segments, {a,b} alternatives, [...]
// classes.
type globPattern struct{ pat string }

func compileGlob(p string) (*globPattern, error) {
	if p == "" {
		return nil, runtimechain.Business("pattern is required, e.g. **/*.go")
	}
	if len(p) > 1000 || strings.ContainsRune(p, 0) {
		return nil, runtimechain.Business("pattern must be at most 1000 characters without NUL")
	}
	clean := strings.Trim(p, "/")
	segs := strings.Split(clean, "/")
	if len(segs) > maxPatternSegments {
		return nil, runtimechain.Business("pattern has more than %d path segments", maxPatternSegments)
	}
	if slices.Contains(segs, "..") {
		return nil, runtimechain.Business("pattern %q must not contain ..", p)
	}
	clean = path.Clean(clean)
	if clean == "." {
		return nil, runtimechain.Business("pattern %q matches nothing but the folder itself", p)
	}
	if !doublestar.ValidatePattern(clean) {
		return nil, runtimechain.Business("pattern %q is malformed (unclosed [ or {)", p)
	}
	return &globPattern{pat: clean}, nil
}

// match reports whether the slash-separated relative path matches.
func (g *globPattern) match(rel string) bool {
	ok, _ := doublestar.Match(g.pat, rel)
	return ok
}

// relativeTo returns p relative to dir (both relative to the user-data
// root, dir possibly ".").
func relativeTo(dir, p string) string {
	if dir == "." {
		return p
	}
	return strings.TrimPrefix(p, dir+"/")
}

// patternUnder makes an absolute pattern relative to the search folder.
func patternUnder(pattern, scope string) (string, error) {
	if !strings.HasPrefix(pattern, "/") {
		return pattern, nil
	}
	if pattern == scope || strings.HasPrefix(pattern, scope+"/") {
		return strings.TrimPrefix(strings.TrimPrefix(pattern, scope), "/"), nil
	}
	return "", runtimechain.Business("pattern %q is absolute but not under the search path %s; give a pattern relative to path", pattern, scope)
}

// glob implements glob {pattern, path?, include_dirs?}: paths under the
// search folder whose path relative to it matches the pattern, in lexical
// order, at most GlobMaxResults, as virtual paths.
func (s *Dispatcher) glob(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	scope, rel, err := searchScope(args)
	if err != nil {
		return nil, err
	}
	pattern, err := patternUnder(strArg(args, "pattern"), scope)
	if err != nil {
		return nil, err
	}
	g, err := compileGlob(pattern)
	if err != nil {
		return nil, err
	}
	includeDirs, _ := args["include_dirs"].(bool)
	r, err := s.ws.Root(ec.ThreadID())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := isDir(r, rel, scope); err != nil {
		return nil, err
	}
	b := newWalkBudget(ctx, s.now())
	var out []string
	truncated := false
	err = walkFiles(r, rel, b, func(p string, d fs.DirEntry) error {
		if d.IsDir() && !includeDirs {
			return nil
		}
		if !g.match(relativeTo(rel, p)) {
			return nil
		}
		if len(out) == GlobMaxResults {
			truncated = true
			return errStopWalk
		}
		v := virtualOf(p)
		if d.IsDir() {
			v += "/"
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fsErr(scope, err)
	}
	if len(out) == 0 && b.stopped == "" {
		return &runtimechain.Outcome{Text: fmt.Sprintf("No files match %q under %s.", pattern, scope)}, nil
	}
	text := strings.Join(out, "\n")
	if truncated {
		text += fmt.Sprintf("\n(results truncated at %d; narrow the pattern or the path)", GlobMaxResults)
	}
	if b.stopped != "" {
		text += "\n(" + b.stopped + ")"
	}
	return &runtimechain.Outcome{Text: strings.TrimLeft(text, "\n")}, nil
}

func isDir(r *os.Root, rel, clean string) error {
	st, err := r.Stat(rel)
	if err != nil {
		return fsErr(clean, err)
	}
	if !st.IsDir() {
		return runtimechain.Business("%s is not a directory", clean)
	}
	return nil
}

// grep implements grep {pattern, path?, glob?, literal?, case_sensitive?}:
// lines matching an RE2 expression in the text files under the search
// folder, as "<virtual path>:<line>: <text>", at most GrepMaxResults.
// Files over 1 MiB and binary files (a NUL in the first 8 KiB) are
// skipped; the total bytes read and the walk are bounded.
func (s *Dispatcher) grep(ctx context.Context, ec *runtimechain.Call, args map[string]any) (*runtimechain.Outcome, error) {
	scope, rel, err := searchScope(args)
	if err != nil {
		return nil, err
	}
	pattern := strArg(args, "pattern")
	if pattern == "" {
		return nil, runtimechain.Business("pattern is required")
	}
	if len(pattern) > grepMaxPattern {
		return nil, runtimechain.Business("pattern must be at most %d characters", grepMaxPattern)
	}
	expr := pattern
	if lit, _ := args["literal"].(bool); lit {
		expr = regexp.QuoteMeta(pattern)
	}
	if cs, _ := args["case_sensitive"].(bool); !cs {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, runtimechain.Business("pattern is not a valid RE2 regular expression: %v", err)
	}
	var filter *globPattern
	if gp := strArg(args, "glob"); gp != "" {
		if filter, err = compileGlob(gp); err != nil {
			return nil, err
		}
	}
	r, err := s.ws.Root(ec.ThreadID())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return nil, fsErr(scope, err)
	}
	b := newWalkBudget(ctx, s.now())
	g := &grepRun{re: re, root: r, budget: b}
	if !st.IsDir() {
		g.file(rel)
	} else {
		err = walkFiles(r, rel, b, func(p string, d fs.DirEntry) error {
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			if filter != nil && !filter.matchName(relativeTo(rel, p)) {
				return nil
			}
			return g.file(p)
		})
		if err != nil {
			return nil, fsErr(scope, err)
		}
	}
	return &runtimechain.Outcome{Text: g.report(pattern, scope)}, nil
}

// matchName matches a glob filter: against the base name when the filter
// has one segment ("*.go"), else against the relative path.
func (g *globPattern) matchName(rel string) bool {
	if !strings.Contains(g.pat, "/") && !strings.Contains(g.pat, "**") {
		return g.match(path.Base(rel))
	}
	return g.match(rel)
}

// grepRun is the state of one grep call.
type grepRun struct {
	re      *regexp.Regexp
	root    *os.Root
	budget  *walkBudget
	out     []string
	bytes   int64
	files   int
	skipped int
	full    bool
}

// file greps one file (relative to the user-data root); it returns
// errStopWalk once the results or the byte budget are exhausted.
func (g *grepRun) file(rel string) error {
	f, err := g.root.Open(rel)
	if err != nil {
		return nil // a link leaving the root or an unreadable file: skipped
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	if st.Size() > grepMaxFileBytes {
		g.skipped++
		return nil
	}
	if g.bytes+st.Size() > grepMaxTotalBytes {
		g.budget.stopped = fmt.Sprintf("the search read %d MiB and stopped; narrow the path or use glob", grepMaxTotalBytes>>20)
		return errStopWalk
	}
	data, err := io.ReadAll(io.LimitReader(f, grepMaxFileBytes+1))
	if err != nil || len(data) > grepMaxFileBytes {
		return nil
	}
	g.bytes += int64(len(data))
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		g.skipped++
		return nil
	}
	g.files++
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), grepMaxFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !g.re.MatchString(line) {
			continue
		}
		if len(g.out) == GrepMaxResults {
			g.full = true
			return errStopWalk
		}
		g.out = append(g.out, fmt.Sprintf("%s:%d: %s", virtualOf(rel), n, clipLine(line)))
	}
	return nil
}

func clipLine(s string) string {
	s = strings.TrimRight(s, "\r")
	if utf8.RuneCountInString(s) <= grepMaxLine {
		return s
	}
	r := []rune(s)
	return string(r[:grepMaxLine]) + "…"
}

func (g *grepRun) report(pattern, scope string) string {
	var sb strings.Builder
	if len(g.out) == 0 {
		fmt.Fprintf(&sb, "No matches for %q under %s (%d files searched).", pattern, scope, g.files)
	} else {
		sb.WriteString(strings.Join(g.out, "\n"))
	}
	if g.full {
		fmt.Fprintf(&sb, "\n(results truncated at %d matches; narrow the pattern, the path or the glob)", GrepMaxResults)
	}
	if g.skipped > 0 {
		fmt.Fprintf(&sb, "\n(%d binary or larger-than-1-MiB files skipped)", g.skipped)
	}
	if g.budget.stopped != "" {
		sb.WriteString("\n(" + g.budget.stopped + ")")
	}
	return sb.String()
}
