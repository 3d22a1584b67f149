package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// toolSearch implements tool_search (deerflow-reference §2.4, §2.10): the
// catalog searches exactly the thread's deferred, authorized set (the same
// candidates as the assembly hash); results the active skill policy does not
// allow are removed; the rest are promoted under the assembly hash. When the
// catalog answers with another hash it moved: the runtime re-assembles and
// searches again, and never promotes under a stale hash.
func (s *Server) toolSearch(ctx context.Context, ec *execCtx) (*outcome, error) {
	q := strings.TrimSpace(strArg(ec.args, "query"))
	if q == "" {
		return nil, business("query must not be empty: use \"select:<name>\", \"+<word> <keywords>\" or keywords")
	}
	v := ec.view
	for attempt := 0; ; attempt++ {
		resp, err := s.catalog.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: q, Limit: int32(s.cfg.ToolSearch.SearchLimit),
			Candidates: &typev1.StringList{Values: v.base.deferredNames}})
		if status.Code(err) == codes.InvalidArgument {
			return nil, business("invalid query: %s", status.Convert(err).Message())
		}
		if err != nil {
			return nil, upstreamFailure("catalog", err)
		}
		if resp.GetCatalogHash() != v.base.hash {
			if attempt > 0 {
				return nil, fmt.Errorf("the tool catalog changed during the search (hash %s, assembly %s); retry the search", resp.GetCatalogHash(), v.base.hash)
			}
			s.watch.invalidate()
			b, err := s.baseWithRetry(ctx, ec.thread)
			if err != nil {
				return nil, err
			}
			v = s.makeView(ctx, ec.thread, b)
			ec.view = v
			if !b.hasDeferred() {
				return nil, business("no tools are deferred any more; the tools you can call are bound directly")
			}
			continue
		}
		var names []string
		var schemas []map[string]any
		filtered := 0
		for _, h := range resp.GetHits() {
			t := v.base.deferred[h.GetTool().GetName()]
			if t == nil {
				continue // not in the authorized deferred set (never promote outside it)
			}
			if !v.allows(t.name) {
				filtered++
				continue
			}
			names = append(names, t.name)
			params := map[string]any{"type": "object", "properties": map[string]any{}}
			if t.params != nil {
				params = t.params.AsMap()
			}
			schemas = append(schemas, map[string]any{"name": t.name, "description": t.description, "parameters": params})
		}
		o := &outcome{promoted: &runtimev1.Promoted{CatalogHash: v.base.hash, Names: names}}
		switch {
		case len(names) > 0:
			var sb strings.Builder
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			_ = enc.Encode(schemas)
			o.text = strings.TrimRight(sb.String(), "\n")
			s.metrics.promotions.WithLabelValues("tool_search").Add(float64(len(names)))
		case filtered > 0:
			o.text = fmt.Sprintf("No tools matching %s are allowed by the active skill policy.", q)
		default:
			o.text = "No tools found matching: " + q
		}
		return o, nil
	}
}

// askClarification renders the question. The agent loop (issue 8) ends the
// turn on it; through ExecuteToolCall it is a plain result.
func (s *Server) askClarification(ec *execCtx) (*outcome, error) {
	q := strings.TrimSpace(strArg(ec.args, "question"))
	if q == "" {
		return nil, business("question must not be empty")
	}
	var sb strings.Builder
	if c := strings.TrimSpace(strArg(ec.args, "context")); c != "" {
		sb.WriteString(c + "\n\n")
	}
	sb.WriteString(q)
	if opts, _ := ec.args["options"].([]any); len(opts) > 0 {
		for i, o := range opts {
			fmt.Fprintf(&sb, "\n  %d. %v", i+1, o)
		}
	}
	return &outcome{text: sb.String()}, nil
}

// describeSkill implements describe_skill (deerflow-reference §4.5) over
// the skills the principal may use within the agent's allowlist.
func (s *Server) describeSkill(ctx context.Context, ec *execCtx) (*outcome, error) {
	q := strings.TrimSpace(strArg(ec.args, "name"))
	if q == "" {
		return nil, business("name must not be empty")
	}
	allow := make([]string, 0, len(ec.view.base.skills))
	for _, sk := range ec.view.base.skills {
		allow = append(allow, sk.GetName())
	}
	resp, err := s.skills.DescribeSkills(actingFor(ctx), &skillsv1.DescribeSkillsRequest{Query: q, Allowlist: &typev1.StringList{Values: allow}})
	if err != nil {
		return nil, upstreamFailure("skills", err)
	}
	var blocks []string
	for _, m := range resp.GetMatches() {
		sk := m.GetSkill()
		if ec.view.base.skillsByName[sk.GetName()] == nil {
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
			escapeText(sk.GetName()), escapeText(sk.GetDescription()), label, escapeText(tools), escapeText(skillMDPath(sk))))
	}
	if len(blocks) == 0 {
		return &outcome{text: "No skills matched: " + q}, nil
	}
	return &outcome{text: strings.Join(blocks, "\n\n")}, nil
}

// reviewSkill implements review_skill_package (deerflow-reference §4.11)
// through the skills service's ReviewSkillPackage: target is an installed
// skill (a name or skill://<category>/<name>), a path under /mnt/user-data
// to a zip or tar.gz archive (e.g. an uploaded .skill file) or to a folder
// holding SKILL.md (sent as inline files), or inline://<name> with the
// SKILL.md text in inline_content. The bounded model-visible text is the
// result, the full report becomes an artifact. Reviewing never activates the
// skill, and a refused archive is reviewed too (one blocker naming the
// refusal).
func (s *Server) reviewSkill(ctx context.Context, ec *execCtx) (*outcome, error) {
	target := strings.TrimSpace(strArg(ec.args, "target"))
	include, _ := ec.args["include_content"].(bool)
	req := &skillsv1.ReviewSkillPackageRequest{IncludeContent: include}
	var label string
	switch {
	case strings.HasPrefix(target, "inline://"):
		name := strings.Trim(strings.TrimPrefix(target, "inline://"), "/")
		content := strArg(ec.args, "inline_content")
		if name == "" || strings.ContainsAny(name, "/\\") {
			return nil, business("target inline://<name> needs a skill name without '/'")
		}
		if strings.TrimSpace(content) == "" {
			return nil, business("inline_content is required with an inline:// target (the SKILL.md text)")
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
			return nil, business("target must be a skill name, skill://<category>/<name>, a path under /mnt/user-data, or inline://<name>")
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Name{Name: name}
		label = name
	}
	resp, err := s.skills.ReviewSkillPackage(actingFor(ctx), req)
	if status.Code(err) == codes.NotFound {
		return nil, business("skill %s is not installed", label)
	}
	if status.Code(err) == codes.InvalidArgument {
		return nil, business("the skills service refused the package: %s", status.Convert(err).Message())
	}
	if err != nil {
		return nil, upstreamFailure("skills", err)
	}
	o := &outcome{text: resp.GetText()}
	if rep := resp.GetFullReport(); rep != "" {
		if a, err := s.saveResult(ec, "review-"+safeLabel(label), ".json", rep); err == nil {
			o.artifacts = append(o.artifacts, a)
		}
	}
	return o, nil
}

// Review input bounds (deerflow-reference §4.11 snapshot limits, capped
// by what one gRPC message can carry).
const (
	reviewMaxFiles = 4096
	reviewMaxBytes = 32 << 20
)

// reviewLimit is the byte bound of a package sent for review: 32 MiB, or
// less when server.max_message_bytes is smaller (64 KiB left for the rest
// of the request).
func (s *Server) reviewLimit() int64 {
	limit := int64(reviewMaxBytes)
	if m := int64(s.env.MaxMessageBytes); m > 0 && m-64<<10 < limit {
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
func (s *Server) reviewSource(ec *execCtx, target string, req *skillsv1.ReviewSkillPackageRequest) (string, error) {
	clean, rel, err := cleanVirtual(target, false)
	if err != nil {
		return "", err
	}
	r, err := s.root(ec.thread.Proto.GetThreadId())
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
			return "", business("%s is %d bytes; at most %d bytes can be reviewed", clean, fi.Size(), limit)
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
				return business("%s holds more than %d files", clean, reviewMaxFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > limit {
				return business("%s holds more than %d bytes", clean, limit)
			}
			b, err := r.ReadFile(p)
			if err != nil {
				return err
			}
			files.Files = append(files.Files, &skillsv1.SkillFile{Path: relPath, Content: b})
			return nil
		})
		if err != nil {
			var be *errBusiness
			if errors.As(err, &be) {
				return "", err
			}
			return "", fsErr(clean, err)
		}
		if len(files.Files) == 0 {
			return "", business("%s holds no regular files to review (skipped: %s)", clean, strings.Join(skipped, ", "))
		}
		req.Source = &skillsv1.ReviewSkillPackageRequest_Files{Files: files}
		return name, nil
	}
	return "", business("%s is not a regular file or folder (symbolic links are not followed)", clean)
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

// saveResult writes text to /mnt/user-data/outputs/.tool-results/<prefix>-<12 hex><ext>.
func (s *Server) saveResult(ec *execCtx, prefix, ext, text string) (*runtimev1.Artifact, error) {
	sum := sha256.Sum256([]byte(ec.callID + "\x00" + text))
	rel := "outputs/.tool-results/" + prefix + "-" + hex.EncodeToString(sum[:])[:12] + ext
	r, err := s.root(ec.thread.Proto.GetThreadId())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.MkdirAll("outputs/.tool-results", 0o700); err != nil {
		return nil, err
	}
	if err := r.WriteFile(rel, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return &runtimev1.Artifact{Path: userDataRoot + rel, Size: int64(len(text)), MimeType: mimeOf(rel), ToolCallId: ec.callID}, nil
}

// budget is the output budget (deerflow-reference §6.2 ToolOutputBudget):
// a text result longer than runtime.tool_output.externalize_min_chars is
// saved as a thread artifact and replaced by a head/tail synopsis naming the
// path, which read_file can page through. Non-text blocks are kept.
func (s *Server) budget(ec *execCtx, o *outcome) {
	limit := s.cfg.ToolOutput.ExternalizeMinChars
	if limit <= 0 || slices.Contains(s.cfg.ToolOutput.ExemptTools, ec.name) || ec.view == nil {
		return
	}
	text := o.text
	if o.content != nil {
		text = textOf(o.content)
	}
	n := len([]rune(text))
	if n <= limit {
		return
	}
	name := ec.name
	if len(name) > 40 {
		name = name[:40]
	}
	head, tail := s.cfg.ToolOutput.PreviewHeadChars, s.cfg.ToolOutput.PreviewTailChars
	r := []rune(text)
	headText, tailText := string(r[:head]), string(r[n-tail:])
	if i := strings.LastIndexByte(headText, '\n'); i > head/2 {
		headText = headText[:i+1]
	}
	if i := strings.IndexByte(tailText, '\n'); i >= 0 && i < tail/2 {
		tailText = tailText[i+1:]
	}
	omitted := n - len([]rune(headText)) - len([]rune(tailText))
	var synopsis string
	a, err := s.saveResult(ec, name, ".txt", text)
	if err == nil {
		lines := strings.Count(text, "\n") + 1
		synopsis = fmt.Sprintf("[The output of %s was %d characters (%d lines), over the output budget. The full text is saved at %s. Read it with read_file, using start_line/end_line to page through it.]\n--- head ---\n%s\n... [%d characters omitted] ...\n--- tail ---\n%s",
			ec.name, n, lines, a.Path, headText, omitted, tailText)
		o.artifacts = append(o.artifacts, a)
	} else {
		synopsis = fmt.Sprintf("%s\n... [%d characters omitted: the output could not be saved] ...\n%s", headText, omitted, tailText)
	}
	if o.content == nil {
		o.text = synopsis
		return
	}
	kept := []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: synopsis}}
	for _, b := range o.content {
		if b.GetType() != typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
			kept = append(kept, b)
		}
	}
	o.content = kept
}
