package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// toolSearch implements tool_search (docs/deerflow.md §2.4, §2.10): the
// catalog searches exactly the thread's deferred, authorized set (the same
// candidates as the assembly hash); results the active skill policy does not
// allow are removed; the rest are promoted under the assembly hash. When the
// catalog answers with another hash it moved: the runtime re-assembles and
// searches again, and never promotes under a stale hash.
func (s *Dispatcher) toolSearch(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	q := strings.TrimSpace(strArg(ec.Args, "query"))
	if q == "" {
		return nil, runtimechain.Business("query must not be empty: use \"select:<name>\", \"+<word> <keywords>\" or keywords")
	}
	v := ec.View
	for attempt := 0; ; attempt++ {
		resp, err := s.searchDeferred(ctx, q, v.Base)
		if status.Code(err) == codes.InvalidArgument {
			return nil, runtimechain.Business("invalid query: %s", status.Convert(err).Message())
		}
		if err != nil {
			return nil, runtimechain.UpstreamFailure("catalog", err)
		}
		if resp.GetCatalogHash() != v.Base.Hash {
			if attempt > 0 {
				return nil, fmt.Errorf("the tool catalog changed during the search (hash %s, assembly %s); retry the search", resp.GetCatalogHash(), v.Base.Hash)
			}
			s.assembly.Invalidate()
			b, err := s.assembly.Build(ctx, ec.Thread)
			if err != nil {
				return nil, err
			}
			v = s.assembly.View(ctx, ec.Thread, b)
			ec.View = v
			if !b.HasDeferred() {
				return nil, runtimechain.Business("no tools are deferred any more; the tools you can call are bound directly")
			}
			continue
		}
		var names []string
		var schemas []map[string]any
		filtered := 0
		for _, h := range resp.GetHits() {
			t := v.Base.Deferred[h.GetTool().GetName()]
			if t == nil {
				continue // not in the authorized deferred set (never promote outside it)
			}
			if !v.Allows(t.Name) {
				filtered++
				continue
			}
			names = append(names, t.Name)
			// The schema as the call's profile binds it — what the model
			// can call — never the catalog's raw one (docs/architecture.md §3.1).
			schemas = append(schemas, runtimeassembly.SearchForm(t, ec.Profile))
		}
		// Each promotion records the definition hash it was made with
		// (docs/architecture.md §3.1).
		o := &runtimechain.Outcome{Promoted: v.Base.PromotionsFor(names)}
		switch {
		case len(names) > 0:
			var sb strings.Builder
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			_ = enc.Encode(schemas)
			o.Text = strings.TrimRight(sb.String(), "\n")
			if s.promotions != nil {
				s.promotions.WithLabelValues("tool_search").Add(float64(len(names)))
			}
		case filtered > 0:
			o.Text = fmt.Sprintf("No tools matching %s are allowed by the active skill policy.", q)
		default:
			o.Text = "No tools found matching: " + q
		}
		return o, nil
	}
}

// searchDeferred runs the catalog search over the deferred set of b: by
// its candidate view id when the catalog gave one for this set, else (and
// when the catalog no longer knows the id) with every deferred name, which
// teaches the catalog the view (docs/decisions/0144-candidate-views.md).
// Both forms search the same set and return the same hash.
func (s *Dispatcher) searchDeferred(ctx context.Context, q string, b *runtimeassembly.Base) (*catalogv1.SearchToolsResponse, error) {
	req := &catalogv1.SearchToolsRequest{Query: q, Limit: int32(s.cfg.SearchLimit)}
	// Acting for the principal: the catalog resolves the names (and the
	// view) in its tenant's namespace (docs/decisions/0106-per-tenant-name-namespaces.md).
	ctx = runtimeident.ActingFor(ctx)
	if id := s.views.get(b.NSKey()); id != "" {
		req.CandidateView = id
		resp, err := s.catalog.SearchTools(ctx, req)
		if err != nil || resp.GetCandidateView() == id {
			return resp, err
		}
		// Unknown to the catalog (candidate_view_unknown), or a catalog
		// that does not echo the id (one without candidate views, e.g.
		// after a downgrade, searched every tool): resend the names.
		s.views.forget(b.NSKey())
		req.CandidateView = ""
	}
	req.Candidates = &typev1.StringList{Values: b.DeferredNames}
	resp, err := s.catalog.SearchTools(ctx, req)
	if err == nil {
		s.views.put(b.NSKey(), resp.GetCandidateView())
	}
	return resp, err
}

// askClarification renders the question. The agent loop (RunTurn) ends the
// turn on it; through ExecuteToolCall it is a plain result.
func (s *Dispatcher) askClarification(ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	q := strings.TrimSpace(strArg(ec.Args, "question"))
	if q == "" {
		return nil, runtimechain.Business("question must not be empty")
	}
	var sb strings.Builder
	if c := strings.TrimSpace(strArg(ec.Args, "context")); c != "" {
		sb.WriteString(c + "\n\n")
	}
	sb.WriteString(q)
	if opts, _ := ec.Args["options"].([]any); len(opts) > 0 {
		for i, o := range opts {
			fmt.Fprintf(&sb, "\n  %d. %v", i+1, o)
		}
	}
	return &runtimechain.Outcome{Text: sb.String()}, nil
}

// describeSkill implements describe_skill (docs/deerflow.md §4.5) over
// the skills the principal may use within the agent's allowlist.
func (s *Dispatcher) describeSkill(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	q := strings.TrimSpace(strArg(ec.Args, "name"))
	if q == "" {
		return nil, runtimechain.Business("name must not be empty")
	}
	allow := make([]string, 0, len(ec.View.Base.Skills))
	for _, sk := range ec.View.Base.Skills {
		allow = append(allow, sk.GetName())
	}
	resp, err := s.skills.DescribeSkills(runtimeident.ActingFor(ctx), &skillsv1.DescribeSkillsRequest{Query: q, Allowlist: &typev1.StringList{Values: allow}})
	if err != nil {
		return nil, runtimechain.UpstreamFailure("skills", err)
	}
	var blocks []string
	for _, m := range resp.GetMatches() {
		sk := m.GetSkill()
		if ec.View.Base.SkillsByName[sk.GetName()] == nil {
			continue
		}
		label := "[built-in]"
		if sk.GetEditable() {
			label = "[custom, editable]"
		}
		tools := "(all)"
		if sk.GetHasAllowedTools() {
			tools = "(none)"
			if len(sk.GetAllowedTools()) > 0 {
				tools = strings.Join(sk.GetAllowedTools(), ", ")
			}
		}
		blocks = append(blocks, fmt.Sprintf("## Skill: %s\n- Description: %s %s\n- Allowed tools: %s\n- Location: %s",
			runtimeassembly.EscapeText(sk.GetName()), runtimeassembly.EscapeText(sk.GetDescription()), label, runtimeassembly.EscapeText(tools), runtimeassembly.EscapeText(runtimeassembly.SkillMDPath(sk))))
	}
	if len(blocks) == 0 {
		return &runtimechain.Outcome{Text: "No skills matched: " + q}, nil
	}
	return &runtimechain.Outcome{Text: strings.Join(blocks, "\n\n")}, nil
}

// reviewSkill implements review_skill_package (docs/deerflow.md §4.11)
// through the skills service's ReviewSkillPackage: target is an installed
// skill (a name or skill://<category>/<name>), a path under /mnt/user-data
// to a zip or tar.gz archive (e.g. an uploaded .skill file) or to a folder
// holding SKILL.md (sent as inline files), or inline://<name> with the
// SKILL.md text in inline_content. The bounded model-visible text is the
// result, the full report becomes an artifact. Reviewing never activates the
// skill, and a refused archive is reviewed too (one blocker naming the
// refusal).
func (s *Dispatcher) reviewSkill(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	target := strings.TrimSpace(strArg(ec.Args, "target"))
	include, _ := ec.Args["include_content"].(bool)
	req := &skillsv1.ReviewSkillPackageRequest{IncludeContent: include}
	var label string
	switch {
	case strings.HasPrefix(target, "inline://"):
		name := strings.Trim(strings.TrimPrefix(target, "inline://"), "/")
		content := strArg(ec.Args, "inline_content")
		if name == "" || strings.ContainsAny(name, "/\\") {
			return nil, runtimechain.Business("target inline://<name> needs a skill name without '/'")
		}
		if strings.TrimSpace(content) == "" {
			return nil, runtimechain.Business("inline_content is required with an inline:// target (the SKILL.md text)")
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Files{Files: &skillsv1.InlineFiles{Name: name, Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: []byte(content)}}}}
		label = name
	case strings.HasPrefix(target, "/"):
		name, err := s.reviewSource(ec, target, req)
		if err != nil {
			return nil, err
		}
		label = name
	default:
		name := target
		if strings.HasPrefix(target, "skill://") {
			name = path.Base(strings.TrimSuffix(strings.TrimPrefix(target, "skill://"), "/"))
		}
		if name == "" || strings.ContainsAny(name, "/\\") {
			return nil, runtimechain.Business("target must be a skill name, skill://<category>/<name>, a path under /mnt/user-data, or inline://<name>")
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Name{Name: name}
		label = name
	}
	resp, err := s.skills.ReviewSkillPackage(runtimeident.ActingFor(ctx), req)
	if status.Code(err) == codes.NotFound {
		return nil, runtimechain.Business("skill %s is not installed", label)
	}
	if status.Code(err) == codes.InvalidArgument {
		return nil, runtimechain.Business("the skills service refused the package: %s", status.Convert(err).Message())
	}
	if err != nil {
		return nil, runtimechain.UpstreamFailure("skills", err)
	}
	o := &runtimechain.Outcome{Text: resp.GetText()}
	if rep := resp.GetFullReport(); rep != "" {
		if a, err := s.ws.SaveResult(ec.ThreadID(), ec.CallID, "review-"+safeLabel(label), ".json", rep); err == nil {
			o.Artifacts = append(o.Artifacts, a)
		}
	}
	return o, nil
}

// Review input bounds (docs/deerflow.md §4.11 snapshot limits, capped
// by what one gRPC message can carry).
const (
	reviewMaxFiles = 4096
	reviewMaxBytes = 32 << 20
)

// reviewLimit is the byte bound of a package sent for review: 32 MiB, or
// less when server.max_message_bytes is smaller (64 KiB left for the rest
// of the request).
func (s *Dispatcher) reviewLimit() int64 {
	limit := int64(reviewMaxBytes)
	if m := int64(s.cfg.MaxMessageBytes); m > 0 && m-64<<10 < limit {
		limit = m - 64<<10
	}
	return limit
}

// reviewSource reads a package from the thread's workspace: a regular file
// is sent as an archive (the skills service detects zip or tar.gz and
// refuses anything else in the review), a folder as inline files (regular
// files only; symlinks are skipped and named in an error when nothing else
// is there). Reads go through os.Root, so nothing outside the thread's
// user-data folder is reachable.
func (s *Dispatcher) reviewSource(ec *runtimechain.Call, target string, req *skillsv1.ReviewSkillPackageRequest) (string, error) {
	clean, rel, err := CleanVirtual(target, false)
	if err != nil {
		return "", err
	}
	r, err := s.ws.Root(ec.Thread.Proto.GetThreadId())
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if err != nil {
		return "", fsErr(clean, err)
	}
	limit := s.reviewLimit()
	name := path.Base(clean)
	switch {
	case fi.Mode().IsRegular():
		if fi.Size() > limit {
			return "", runtimechain.Business("%s is %d bytes; at most %d bytes can be reviewed", clean, fi.Size(), limit)
		}
		b, err := r.ReadFile(rel)
		if err != nil {
			return "", fsErr(clean, err)
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Archive{Archive: b}
		return strings.TrimSuffix(name, path.Ext(name)), nil
	case fi.IsDir():
		files := &skillsv1.InlineFiles{Name: name}
		var total int64
		var skipped []string
		err := fs.WalkDir(r.FS(), rel, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			relPath := strings.TrimPrefix(strings.TrimPrefix(p, rel), "/")
			if !d.Type().IsRegular() {
				skipped = append(skipped, relPath)
				return nil
			}
			if len(files.Files) == reviewMaxFiles {
				return runtimechain.Business("%s holds more than %d files", clean, reviewMaxFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > limit {
				return runtimechain.Business("%s holds more than %d bytes", clean, limit)
			}
			b, err := r.ReadFile(p)
			if err != nil {
				return err
			}
			files.Files = append(files.Files, &skillsv1.SkillFile{Path: relPath, Content: b})
			return nil
		})
		if err != nil {
			var be *runtimechain.BusinessError
			if errors.As(err, &be) {
				return "", err
			}
			return "", fsErr(clean, err)
		}
		if len(files.Files) == 0 {
			return "", runtimechain.Business("%s holds no regular files to review (skipped: %s)", clean, strings.Join(skipped, ", "))
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Files{Files: files}
		return name, nil
	}
	return "", runtimechain.Business("%s is not a regular file or folder (symbolic links are not followed)", clean)
}

func safeLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}
