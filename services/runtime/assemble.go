package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// baseAssembly is the result of steps 1–4 of ARCHITECTURE §3.1 for one
// principal and agent: everything that does not depend on the thread's own
// state. It is immutable once built (shared through the cache).
type baseAssembly struct {
	agent *runtimev1.Agent
	// tools are every tool that survived sources, groups and authz, in
	// priority order (config → built-ins → MCP), tool_search excluded.
	tools  []*toolDef
	byName map[string]*toolDef
	// bound are the tools bound without promotion (non-deferred).
	bound []*toolDef
	// deferred are the deferred MCP tools by name; deferredNames sorted.
	deferred      map[string]*toolDef
	deferredNames []string
	// hash is the catalog's hash of the deferred set (the thread's hash for
	// the turn); "" when nothing is deferred.
	hash          string
	policyVersion int64
	report        *runtimev1.AssemblyReport
	// routes are the deferred tools with routing mode PREFER and keywords.
	routes []*toolDef
	// hints is the <mcp_routing_hints> section over the authorized tools.
	hints string
	// skills are the enabled skills the principal may use within the
	// agent's allowlist, by name.
	skills       []*skillsv1.Skill
	skillsByName map[string]*skillsv1.Skill
	skillsNote   string
	// deferredText and skillsText are the rendered prompt sections.
	deferredText, skillsText string
}

func (b *baseAssembly) hasDeferred() bool { return len(b.deferredNames) > 0 }

// assemblyFailed is the fail-closed error of assembly.
func assemblyFailed(format string, args ...any) error {
	return statusErr(codes.FailedPrecondition, runtimev1.ErrorReason_ERROR_REASON_ASSEMBLY_FAILED, format, args...)
}

// callContext is the CallContext the runtime sends upstream for a thread.
// is_subagent is true on a subagent's thread (runtimestore.Child, written
// only by the runtime, so authz conditions on it can trust it;
// deerflow-reference §1.4, §3.7).
func callContext(th *runtimestore.Thread, agent *runtimev1.Agent, runID, callID string) *typev1.CallContext {
	return &typev1.CallContext{Agent: agent.GetName(), IsSubagent: th.Child != nil, ThreadId: th.Proto.GetThreadId(), RunId: runID, ToolCallId: callID}
}

// base returns the base assembly for the principal of ctx and the agent,
// from the cache when both watch streams are live.
func (s *Server) base(ctx context.Context, th *runtimestore.Thread) (*baseAssembly, error) {
	agent, err := s.threadAgent(ctx, th)
	if err != nil {
		return nil, err
	}
	p := principalOf(ctx)
	gen, pv, cacheable := s.watch.cacheKey()
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d", auth.FormatActingFor(p), agent.GetName(), agent.GetUpdateTime().AsTime().UnixNano(), gen, pv)
	if th.Child != nil {
		// A subagent's assembly differs (is_subagent, narrowed agent).
		key += "\x00subagent\x00" + agentDigest(agent)
	}
	if cacheable {
		if b := s.cache.get(key, s.now()); b != nil {
			s.metrics.assemblies.WithLabelValues("cached").Inc()
			return b, nil
		}
	}
	b, err := s.buildBase(ctx, p, agent, th)
	if err != nil {
		s.metrics.assemblies.WithLabelValues("failed").Inc()
		return nil, err
	}
	s.metrics.assemblies.WithLabelValues("ok").Inc()
	// Cache only what was decided with live streams, and never a fail-open
	// listing (it must be re-decided as soon as authz answers).
	if g2, pv2, ok := s.watch.cacheKey(); cacheable && ok && g2 == gen && pv2 == pv && !b.report.GetAuthzFailOpen() {
		s.cache.put(key, b, s.now())
	}
	return b, nil
}

// catalogTools returns every catalog tool (cached per catalog generation).
func (s *Server) catalogTools(ctx context.Context) ([]*catalogv1.Tool, error) {
	s.watch.mu.Lock()
	tools, gen, live := s.watch.tools, s.watch.catalogGen, s.watch.catalogLive
	s.watch.mu.Unlock()
	if tools != nil && live {
		return tools, nil
	}
	var all []*catalogv1.Tool
	token := ""
	for {
		resp, err := s.catalog.ListTools(ctx, &catalogv1.ListToolsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.GetTools()...)
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	if all == nil {
		all = []*catalogv1.Tool{}
	}
	s.watch.mu.Lock()
	if s.watch.catalogGen == gen && s.watch.catalogLive {
		s.watch.tools = all
	}
	s.watch.mu.Unlock()
	return all, nil
}

func inList(l *typev1.StringList, v string) bool {
	return l == nil || slices.Contains(l.GetValues(), v)
}

// deferralSettings returns whether deferral is on for the agent and its
// exempt servers (agent settings override runtime.tool_search).
func (s *Server) deferralSettings(a *runtimev1.Agent) (bool, []string) {
	if ts := a.GetToolSearch(); ts != nil {
		return ts.GetEnabled(), ts.GetExemptServers()
	}
	return s.cfg.toolSearchEnabled(), s.cfg.ToolSearch.ExemptServers
}

// filter asks authz which candidates the principal may list. A failure is
// fail closed unless runtime.authz.fail_open_listing is on; then every
// candidate is kept and failOpen is true.
func (s *Server) filter(ctx context.Context, p *typev1.Principal, cc *typev1.CallContext, rt authzv1.ResourceType, names []string) (allowed map[string]bool, denied []*authzv1.DeniedResource, version int64, failOpen bool, err error) {
	allowed = make(map[string]bool, len(names))
	if len(names) == 0 {
		return allowed, nil, 0, false, nil
	}
	resp, err := s.authz.FilterResources(actingFor(ctx), &authzv1.FilterResourcesRequest{Principal: p, ResourceType: rt, Candidates: names, Action: authzv1.Action_ACTION_LIST, CallContext: cc})
	if err != nil {
		if !s.cfg.Authz.FailOpenListing {
			return nil, nil, 0, false, err
		}
		for _, n := range names {
			allowed[n] = true
		}
		return allowed, nil, 0, true, nil
	}
	for _, n := range resp.GetAllowed() {
		allowed[n] = true
	}
	return allowed, resp.GetDenied(), resp.GetPolicyVersion(), resp.GetFailOpen(), nil
}

func reasonText(d *authzv1.DeniedResource) string {
	if len(d.GetReasons()) == 0 {
		return d.GetName() + " (authz.denied)"
	}
	return d.GetName() + " (" + d.GetReasons()[0].GetCode() + ")"
}

// buildBase runs steps 1–4 of ARCHITECTURE §3.1.
func (s *Server) buildBase(ctx context.Context, p *typev1.Principal, agent *runtimev1.Agent, th *runtimestore.Thread) (*baseAssembly, error) {
	b := &baseAssembly{agent: agent, byName: map[string]*toolDef{}, deferred: map[string]*toolDef{}, report: &runtimev1.AssemblyReport{}, skillsByName: map[string]*skillsv1.Skill{}}
	cc := callContext(th, agent, "", "")

	// Skills visible to the principal (for describe_skill, the skills
	// section and slash activation): enabled, in the agent's allowlist,
	// allowed by authz. Skills being unreachable only removes skills.
	if resp, err := s.skills.ListSkills(actingFor(ctx), &skillsv1.ListSkillsRequest{EnabledOnly: true}); err != nil {
		b.skillsNote = "skills unavailable: " + shortErr(err)
		b.report.Notes = append(b.report.Notes, b.skillsNote)
	} else {
		var names []string
		for _, sk := range resp.GetSkills() {
			if sk.GetEnabled() && inList(agent.GetSkills(), sk.GetName()) {
				names = append(names, sk.GetName())
			}
		}
		allowed, _, _, failOpen, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_SKILL, names)
		if err != nil {
			return nil, assemblyFailed("authz unreachable while filtering skills (fail closed): %s", shortErr(err))
		}
		if failOpen {
			b.report.AuthzFailOpen = true
		}
		for _, sk := range resp.GetSkills() {
			if allowed[sk.GetName()] {
				b.skills = append(b.skills, sk)
				b.skillsByName[sk.GetName()] = sk
			}
		}
	}

	// 1. Sources by priority, first wins: config tools (2. filtered by the
	// agent's groups; bash only when allowed) → built-ins → catalog MCP tools.
	var cands []*toolDef
	for _, tc := range s.cfg.Tools {
		if !inList(agent.GetToolGroups(), tc.Group) {
			continue
		}
		if (tc.Group == "bash" || tc.Use == "bash") && !s.cfg.AllowBash {
			continue
		}
		impl := implNames[tc.Use]
		if impl != tc.Name {
			b.report.NameMismatches = append(b.report.NameMismatches, fmt.Sprintf("%s (use %s binds as %s)", tc.Name, tc.Use, impl))
			s.log.Warn("config tool name differs from its implementation; the implementation's name is bound", "name", tc.Name, "use", tc.Use, "bound", impl)
		}
		sp := implSpecs[tc.Use]
		cands = append(cands, &toolDef{name: impl, description: sp.description, params: sp.params, source: sourceConfig, use: tc.Use, group: tc.Group})
	}
	builtins := []string{askClarification, presentFiles}
	if len(b.skills) > 0 {
		builtins = append(builtins, describeSkill)
	}
	builtins = append(builtins, reviewSkillPackage)
	if agent.GetSubagentsEnabled() {
		builtins = append(builtins, taskTool)
	}
	for _, n := range builtins {
		cands = append(cands, builtinDef(n))
	}
	mcpTools, err := s.catalogTools(ctx)
	if err != nil {
		return nil, assemblyFailed("catalog unreachable: %s", shortErr(err))
	}
	for _, t := range mcpTools {
		cands = append(cands, &toolDef{name: t.GetName(), description: t.GetDescription(), params: t.GetInputSchema(), source: sourceMCP, server: t.GetServer(), routing: t.GetRouting()})
	}
	seen := make(map[string]bool, len(cands))
	unique := make([]*toolDef, 0, len(cands))
	for _, c := range cands {
		if c.name == toolSearchName || seen[c.name] {
			b.report.DroppedDuplicates = append(b.report.DroppedDuplicates, c.name+" ("+c.source+")")
			s.log.Warn("duplicate tool name dropped (first wins)", "name", c.name, "source", c.source)
			continue
		}
		seen[c.name] = true
		unique = append(unique, c)
	}

	// 3. Authorization layer 1: mcp_server, then tool (fail closed).
	var servers []string
	serverSeen := map[string]bool{}
	for _, c := range unique {
		if c.source == sourceMCP && !serverSeen[c.server] {
			serverSeen[c.server] = true
			servers = append(servers, c.server)
		}
	}
	srvAllowed, srvDenied, v1, fo1, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, servers)
	if err != nil {
		return nil, assemblyFailed("authz unreachable while filtering mcp servers (fail closed): %s", shortErr(err))
	}
	deniedServer := map[string]string{}
	for _, d := range srvDenied {
		deniedServer[d.GetName()] = reasonText(d)
	}
	names := make([]string, 0, len(unique))
	afterServers := make([]*toolDef, 0, len(unique))
	for _, c := range unique {
		if c.source == sourceMCP && !srvAllowed[c.server] {
			b.report.Denied = append(b.report.Denied, c.name+" (mcp_server "+firstNonEmpty(deniedServer[c.server], c.server+" denied")+")")
			continue
		}
		afterServers = append(afterServers, c)
		names = append(names, c.name)
	}
	b.byName = make(map[string]*toolDef, len(names))
	b.deferred = make(map[string]*toolDef, len(names))
	toolAllowed, toolDenied, v2, fo2, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_TOOL, names)
	if err != nil {
		return nil, assemblyFailed("authz unreachable while filtering tools (fail closed): %s", shortErr(err))
	}
	for _, d := range toolDenied {
		b.report.Denied = append(b.report.Denied, reasonText(d))
	}
	b.policyVersion = max(v1, v2)
	if fo1 || fo2 {
		b.report.AuthzFailOpen = true
	}
	for _, c := range afterServers {
		if toolAllowed[c.name] {
			b.tools = append(b.tools, c)
			b.byName[c.name] = c
		}
	}

	// 4. Deferral of the surviving MCP tools minus exempt servers; the
	// catalog hashes the deferred set.
	on, exempt := s.deferralSettings(agent)
	var deferrable int
	for _, c := range b.tools {
		if c.source == sourceMCP && on && !slices.Contains(exempt, c.server) {
			deferrable++
			b.deferred[c.name] = c
			b.deferredNames = append(b.deferredNames, c.name)
			if c.routing.GetMode() == catalogv1.RoutingMode_ROUTING_MODE_PREFER && len(nonBlank(c.routing.GetKeywords())) > 0 {
				b.routes = append(b.routes, c)
			}
			continue
		}
		b.bound = append(b.bound, c)
	}
	sort.Strings(b.deferredNames)
	if len(b.deferredNames) > 0 {
		h := sha256.New()
		for _, n := range b.deferredNames {
			h.Write([]byte(n))
			h.Write([]byte{0})
		}
		setKey := hex.EncodeToString(h.Sum(nil))
		if memo, ok := s.watch.memoHash(setKey); ok {
			b.hash = memo
		} else {
			s.watch.mu.Lock()
			gen := s.watch.catalogGen
			s.watch.mu.Unlock()
			resp, err := s.catalog.GetCatalog(ctx, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: b.deferredNames}})
			if err != nil {
				return nil, assemblyFailed("catalog hash of the deferred set unavailable (fail closed): %s", shortErr(err))
			}
			if len(resp.GetUnknown()) > 0 {
				// The catalog moved between listing and hashing; the caller retries.
				return nil, status.Errorf(codes.Aborted, "catalog changed during assembly (%d tools vanished); retry", len(resp.GetUnknown()))
			}
			b.hash = resp.GetCatalogHash()
			s.watch.putHash(gen, setKey, b.hash)
		}
	}
	if on && deferrable > 0 && (len(b.deferredNames) == 0 || b.hash == "") {
		return nil, assemblyFailed("deferral is on and %d tools are deferrable, but the deferred set is empty (fail closed)", deferrable)
	}
	b.hints = routingHints(b.tools, b.deferred)
	b.deferredText = deferredSection(b, s.cfg.ToolSearch.DeferredListMax)
	b.skillsText = skillsSection(b)
	return b, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func nonBlank(in []string) []string {
	var out []string
	for _, s := range in {
		if strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// routeMatches returns the deferred tools whose routing keywords match the
// user's text (case-insensitive substring), priority desc then name asc,
// at most k (deerflow-reference §2.8).
func routeMatches(routes []*toolDef, text string, k int) []string {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	low := strings.ToLower(text)
	var hits []*toolDef
	for _, r := range routes {
		for _, kw := range nonBlank(r.routing.GetKeywords()) {
			if strings.Contains(low, strings.ToLower(kw)) {
				hits = append(hits, r)
				break
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		pi, pj := hits[i].routing.GetPriority(), hits[j].routing.GetPriority()
		if pi != pj {
			return pi > pj
		}
		return hits[i].name < hits[j].name
	})
	var out []string
	for _, h := range hits {
		if len(out) == k {
			break
		}
		out = append(out, h.name)
	}
	return out
}

// view is the thread's tool state for one turn on top of a base assembly.
type view struct {
	base     *baseAssembly
	thread   *runtimestore.Thread
	promoted map[string]bool // deferred names promoted under base.hash
	order    []string        // promotion order
	policy   *skillPolicy    // nil = unrestricted
}

// skillPolicy is the resolved tool policy of the thread's active skills.
type skillPolicy struct {
	allowed map[string]bool
	skills  []string
	reason  string
}

func (v *view) allows(name string) bool { return v.policy == nil || v.policy.allowed[name] }

func (v *view) hidden(name string) bool {
	_, deferred := v.base.deferred[name]
	return deferred && !v.promoted[name]
}

func (s *Server) makeView(ctx context.Context, th *runtimestore.Thread, b *baseAssembly) *view {
	v := &view{base: b, thread: th, promoted: map[string]bool{}}
	if pr := th.Proto.GetPromoted(); pr != nil && b.hash != "" && pr.GetCatalogHash() == b.hash {
		for _, n := range pr.GetNames() {
			if _, ok := b.deferred[n]; ok && !v.promoted[n] {
				v.promoted[n] = true
				v.order = append(v.order, n)
			}
		}
	}
	v.policy = s.resolveSkillPolicy(ctx, th, b)
	return v
}

// activeSkills returns the skills whose policy applies: slash-activated
// skills dominate; otherwise skills activated by reading SKILL.md (the most
// recent 8) (deerflow-reference §4.9).
func activeSkills(th *runtimestore.Thread) []*runtimev1.ActiveSkill {
	var slash, read []*runtimev1.ActiveSkill
	for _, a := range th.Proto.GetActiveSkills() {
		if a.GetSource() == runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_SLASH {
			slash = append(slash, a)
		} else {
			read = append(read, a)
		}
	}
	if len(slash) > 0 {
		return slash
	}
	if len(read) > 8 {
		read = read[len(read)-8:]
	}
	return read
}

// resolveSkillPolicy asks the skills service for the policy of the active
// skills; an error fails closed to the always-available names.
func (s *Server) resolveSkillPolicy(ctx context.Context, th *runtimestore.Thread, b *baseAssembly) *skillPolicy {
	act := activeSkills(th)
	if len(act) == 0 {
		return nil
	}
	req := &skillsv1.ResolveSkillPolicyRequest{Allowlist: b.agent.GetSkills(), AlwaysAvailable: alwaysAvailable}
	var names []string
	for _, a := range act {
		req.ActiveSkills = append(req.ActiveSkills, &skillsv1.ActiveSkill{Name: a.GetName(), Digest: a.GetDigest()})
		names = append(names, a.GetName())
	}
	pol := &skillPolicy{allowed: map[string]bool{}, skills: names}
	resp, err := s.skills.ResolveSkillPolicy(actingFor(ctx), req)
	if err != nil {
		for _, n := range alwaysAvailable {
			pol.allowed[n] = true
		}
		pol.reason = "skill policy unavailable (fail closed): " + shortErr(err)
		return pol
	}
	if resp.GetPolicy().GetUnrestricted() && len(resp.GetPolicy().GetUnresolved()) == 0 {
		return nil
	}
	for _, n := range resp.GetPolicy().GetAllowedTools() {
		pol.allowed[n] = true
	}
	for _, n := range alwaysAvailable {
		pol.allowed[n] = true
	}
	pol.reason = resp.GetPolicy().GetReason()
	return pol
}

// boundTools returns the tools to bind: non-deferred tools, tool_search
// when the deferred set is non-empty, and promoted tools — then narrowed by
// the skill policy (ARCHITECTURE §3.1 steps 4–6).
func (v *view) boundTools() (bound []*toolDef, skillFiltered []string) {
	var all []*toolDef
	all = append(all, v.base.bound...)
	if v.base.hasDeferred() {
		all = append(all, builtinDef(toolSearchName))
	}
	for _, n := range v.order {
		all = append(all, v.base.deferred[n])
	}
	for _, t := range all {
		if !v.allows(t.name) {
			skillFiltered = append(skillFiltered, t.name)
			continue
		}
		bound = append(bound, t)
	}
	return bound, skillFiltered
}

// AssembleTools runs the assembly pipeline (ARCHITECTURE §3.1) for the next
// model call of a thread: slash activation, the base assembly (sources,
// groups, authz layer 1, deferral and hash), promotions under the hash plus
// routing auto-promotions from user_message, and the skill policy last.
func (s *Server) AssembleTools(ctx context.Context, req *runtimev1.AssembleToolsRequest) (*runtimev1.AssembleToolsResponse, error) {
	th, _, err := s.ownThread(ctx, req.GetThreadId())
	if err != nil {
		return nil, err
	}
	b, err := s.baseWithRetry(ctx, th)
	if err != nil {
		return nil, err
	}
	resp := &runtimev1.AssembleToolsResponse{CatalogHash: b.hash, PolicyVersion: b.policyVersion, Deferred: b.deferredNames}
	report := proto.Clone(b.report).(*runtimev1.AssemblyReport)
	if report.AuthzFailOpen {
		s.recordFailOpen(ctx, th.Proto.GetThreadId(), "assembly proceeded unfiltered: authz unreachable and runtime.authz.fail_open_listing is on")
	}

	// Slash activation (deerflow-reference §4.7).
	var activation *runtimev1.PromptSection
	if name, task, ok := parseSlash(req.GetUserMessage()); ok {
		th, activation, resp.DirectAnswer, resp.ActivatedSkill, err = s.activateSlash(ctx, th, b, name, task)
		if err != nil {
			return nil, err
		}
		if resp.DirectAnswer != "" {
			resp.SkipModel = true
		}
	}

	// Routing auto-promotions (deerflow-reference §2.8).
	if b.hasDeferred() && len(b.routes) > 0 {
		if names := routeMatches(b.routes, req.GetUserMessage(), s.cfg.ToolSearch.AutoPromoteTopK); len(names) > 0 {
			report.AutoPromoted = names
			th, err = s.store.UpdateThread(ctx, th.Proto.GetThreadId(), func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
				t.Proto.Promoted = runtimestore.MergePromoted(t.Proto.Promoted, &runtimev1.Promoted{CatalogHash: b.hash, Names: names})
				return nil, nil
			})
			if err != nil {
				return nil, storeErr(err)
			}
			s.metrics.promotions.WithLabelValues("routing").Add(float64(len(names)))
		}
	}

	v := s.makeView(ctx, th, b)
	bound, filtered := v.boundTools()
	report.SkillFiltered = filtered
	if v.policy != nil && v.policy.reason != "" {
		report.Notes = append(report.Notes, "skill policy: "+v.policy.reason)
	}
	for _, t := range bound {
		oa, an := schemaOf(t)
		resp.Tools = append(resp.Tools, &runtimev1.ToolSchema{Name: t.name, Openai: oa, Anthropic: an, Source: t.source})
	}
	resp.PromptSections = s.promptSections(b, activation)
	resp.Report = report
	return resp, nil
}

// baseWithRetry builds the base assembly, retrying once when the catalog
// moved during assembly.
func (s *Server) baseWithRetry(ctx context.Context, th *runtimestore.Thread) (*baseAssembly, error) {
	b, err := s.base(ctx, th)
	if status.Code(err) == codes.Aborted {
		s.watch.invalidate()
		b, err = s.base(ctx, th)
	}
	return b, err
}

func (s *Server) recordFailOpen(ctx context.Context, threadID, detail string) {
	s.metrics.failOpen.Inc()
	s.log.Warn("authz fail-open listing", "thread", threadID)
	if err := s.store.AppendEvent(context.WithoutCancel(ctx), runtimestore.Event{ThreadID: threadID, Kind: "authz.fail_open", Detail: detail}); err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
		s.log.Error("record fail-open event", "error", err)
	}
}
