package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/search"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// allowSet is an agent allowlist: nil = every skill, empty = none.
type allowSet map[string]bool

func allowOf(l *typev1.StringList) allowSet {
	if l == nil {
		return nil
	}
	out := allowSet{}
	for _, v := range l.GetValues() {
		out[v] = true
	}
	return out
}

func (a allowSet) has(name string) bool { return a == nil || a[name] }

// intersect returns a ∩ b where nil means "all" (docs/deerflow.md §1.4: a
// subagent's allowlist is the intersection with its parent's).
func intersect(a, b allowSet) allowSet {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := allowSet{}
	for k := range a {
		if b[k] {
			out[k] = true
		}
	}
	return out
}

// DescribeSkills searches the user's enabled skills within the allowlist with
// the tool-search query forms (select:, +required rest, ranked), using the
// internal/search library (BM25F + static vectors, docs/deerflow.md §4.5).
func (s *Server) DescribeSkills(ctx context.Context, req *skillsv1.DescribeSkillsRequest) (*skillsv1.DescribeSkillsResponse, error) {
	u := userOf(ctx)
	sks, err := s.visible(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "DescribeSkills", err)
	}
	st, err := s.enableStates(ctx, u)
	if err != nil {
		return nil, s.fail(ctx, "DescribeSkills", err)
	}
	allow := allowOf(req.GetAllowlist())
	byName := map[string]skillsstore.Skill{}
	var docs []search.Document
	for _, sk := range sks {
		if !st.enabled(sk) || !allow.has(sk.Name) {
			continue
		}
		d, err := s.doc(sk)
		if err != nil {
			continue // unreadable skills are not discoverable
		}
		fm := d.doc.Frontmatter
		doc := search.Document{Name: sk.Name, Description: fm.Description}
		for k, v := range fm.Metadata {
			doc.Keywords = append(doc.Keywords, k, v)
		}
		sort.Strings(doc.Keywords)
		docs = append(docs, doc)
		byName[sk.Name] = sk
	}
	out := &skillsv1.DescribeSkillsResponse{}
	if len(docs) == 0 {
		return out, nil
	}
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = s.cfg.Describe.DefaultLimit
	}
	limit = min(limit, s.cfg.Describe.MaxLimit)
	ix, err := s.describeIndex(ctx, docs)
	if err != nil {
		return nil, s.fail(ctx, "DescribeSkills", err)
	}
	res, err := ix.Search(ctx, search.Request{Query: req.GetQuery(), Mode: search.ModeAuto, Limit: limit})
	if errors.Is(err, search.ErrInvalidQuery) {
		return nil, status.Errorf(codes.InvalidArgument, "query: %v", err)
	}
	if err != nil {
		return nil, s.fail(ctx, "DescribeSkills", err)
	}
	for _, r := range res.Results {
		sk := byName[r.Name]
		out.Matches = append(out.Matches, &skillsv1.SkillMatch{Skill: s.skillProto(sk, true, u), Score: r.Score})
	}
	return out, nil
}

// describeIndex returns a search index over docs, shared by every request
// with the same document set (the key hashes each document's fields; skill
// content is immutable per digest, so a cached index is never stale).
func (s *Server) describeIndex(ctx context.Context, docs []search.Document) (*search.Index, error) {
	h := sha256.New()
	for _, d := range docs {
		fmt.Fprintf(h, "%q %q %q\n", d.Name, d.Description, d.Keywords)
	}
	key := hex.EncodeToString(h.Sum(nil))
	if ix, ok := s.indexes.Get(key); ok {
		return ix, nil
	}
	ix := search.NewIndex(search.Options{})
	if err := ix.Replace(ctx, docs); err != nil && !errors.Is(err, search.ErrEmbedding) {
		return nil, err
	}
	s.indexes.Add(key, ix)
	return ix, nil
}

// ResolveSkillPolicy computes the tool policy of the active skills
// (docs/deerflow.md §4.9):
//   - no active skill: unrestricted (passive; listing never restricts);
//   - any active skill that cannot be resolved for the user (missing,
//     disabled, outside the effective allowlist, or changed since activation
//     when a digest was recorded), or a store failure: fail closed to the
//     caller's always-available names only;
//   - otherwise the union of the active skills' allowed-tools plus the
//     always-available names, or unrestricted when none declares allowed-tools.
//
// The effective allowlist is the agent's allowlist intersected with the
// parent's (subagents).
func (s *Server) ResolveSkillPolicy(ctx context.Context, req *skillsv1.ResolveSkillPolicyRequest) (*skillsv1.ResolveSkillPolicyResponse, error) {
	u := userOf(ctx)
	always := dedupe(req.GetAlwaysAvailable())
	closed := func(unresolved []string, why string) *skillsv1.ResolveSkillPolicyResponse {
		return &skillsv1.ResolveSkillPolicyResponse{Policy: &skillsv1.SkillPolicy{
			AllowedTools: always, Unresolved: unresolved,
			Reason: "fail closed to the always-available tools: " + why}}
	}
	if len(req.GetActiveSkills()) == 0 {
		return &skillsv1.ResolveSkillPolicyResponse{Policy: &skillsv1.SkillPolicy{Unrestricted: true,
			Reason: "no active skill; tools are not restricted"}}, nil
	}
	allow := intersect(allowOf(req.GetAllowlist()), allowOf(req.GetParentAllowlist()))
	st, err := s.enableStates(ctx, u)
	if err != nil {
		s.log.ErrorContext(ctx, "skills policy: registry unavailable", "error", err)
		return closed(nil, "the skill registry could not be read"), nil
	}
	var unresolved, why []string
	seen := map[string]bool{}
	union := map[string]bool{}
	declared := 0
	var names []string
	for _, a := range req.GetActiveSkills() {
		name := a.GetName()
		if seen[name] {
			continue
		}
		seen[name] = true
		sk, err := s.resolve(ctx, u, name)
		var reason string
		switch {
		case err != nil && status.Code(err) == codes.NotFound:
			reason = "not installed"
		case err != nil:
			s.log.ErrorContext(ctx, "skills policy: registry read failed", "error", err)
			reason = "registry read failed"
		case !st.enabled(sk):
			reason = "disabled"
		case !allow.has(name):
			reason = "outside the agent's skills allowlist"
		case a.GetDigest() != "" && a.GetDigest() != sk.Digest:
			reason = "changed since it was activated"
		}
		if reason == "" {
			d, derr := s.doc(sk)
			if derr != nil {
				reason = "SKILL.md unreadable"
			} else if d.doc.Frontmatter.AllowedToolsSet {
				declared++
				for _, t := range d.doc.Frontmatter.AllowedTools {
					union[t] = true
				}
			}
		}
		if reason != "" {
			unresolved = append(unresolved, name)
			why = append(why, fmt.Sprintf("%s (%s)", name, reason))
			continue
		}
		names = append(names, name)
	}
	if len(unresolved) > 0 {
		return closed(unresolved, "active skill(s) could not be resolved: "+strings.Join(why, ", ")), nil
	}
	if declared == 0 {
		return &skillsv1.ResolveSkillPolicyResponse{Policy: &skillsv1.SkillPolicy{Unrestricted: true,
			Reason: "no active skill declares allowed-tools: " + strings.Join(names, ", ")}}, nil
	}
	for _, t := range always {
		union[t] = true
	}
	allowed := make([]string, 0, len(union))
	for t := range union {
		allowed = append(allowed, t)
	}
	sort.Strings(allowed)
	return &skillsv1.ResolveSkillPolicyResponse{Policy: &skillsv1.SkillPolicy{AllowedTools: allowed,
		Reason: fmt.Sprintf("allowed-tools of %s plus the always-available tools", strings.Join(names, ", "))}}, nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, v := range in {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
