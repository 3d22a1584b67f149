package runtimeassembly

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/prometheus/client_golang/prometheus"
	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Base is the result of steps 1–4 of docs/architecture.md §3.1 for one
// principal and agent: everything that does not depend on the thread's own
// state. It is immutable once built (shared through the cache).
type Base struct {
	Agent *runtimev1.Agent
	// tools are every tool that survived sources, groups and authz, in
	// priority order (config → built-ins → MCP), tool_search excluded.
	Tools  []*Tool
	ByName map[string]*Tool
	// Held are the catalog tools of pinned servers held for review
	// (PENDING, CHANGED, REJECTED) that the principal would see, by name:
	// never bound or callable; a promoted one is refused with its state
	// (runtimechain.ToolLookup).
	Held map[string]catalogv1.ToolState
	// bound are the tools bound without promotion (non-deferred).
	Bound []*Tool
	// deferred are the deferred MCP tools by name; deferredNames sorted.
	Deferred      map[string]*Tool
	DeferredNames []string
	// hash is the catalog's hash of the deferred set (the thread's hash for
	// the turn); "" when nothing is deferred.
	Hash string
	// ViewKey is the hex SHA-256 of DeferredNames (each followed by NUL):
	// the content key of the deferred set, under which tool_search
	// remembers the catalog's candidate view (docs/decisions/0144-candidate-views.md);
	// "" when nothing is deferred.
	ViewKey string
	// Namespace is the tenant whose namespace the catalog resolved the
	// deferred names in (the principal's; docs/decisions/0106-per-tenant-name-namespaces.md):
	// equal ViewKeys of two tenants may stand for different tools, so
	// per-set caches key by Namespace and ViewKey together (NSKey).
	Namespace     string
	PolicyVersion int64
	Report        *runtimev1.AssemblyReport
	// routes are the deferred tools with routing mode PREFER and keywords.
	Routes []*Tool
	// hints is the <mcp_routing_hints> section over the authorized tools.
	Hints string
	// skills are the enabled skills the principal may use within the
	// agent's allowlist, by name.
	Skills       []*skillsv1.Skill
	SkillsByName map[string]*skillsv1.Skill
	SkillsNote   string
	// deferredText and skillsText are the rendered prompt sections.
	DeferredText, SkillsText string
}

// HasDeferred reports whether the assembly defers any tool (then
// tool_search exists).
func (b *Base) HasDeferred() bool { return len(b.DeferredNames) > 0 }

// Settings are the parts of the runtime configuration that assembly reads
// (translated from runtime.tools, runtime.allow_bash, runtime.tool_search
// and runtime.authz by the runtime's wiring).
type Settings struct {
	// Tools are the config tools in configuration order.
	Tools []ConfigTool
	// AllowBash binds config tools of group or use `bash`.
	AllowBash bool
	// ToolSearch is the global deferral switch (an agent's tool_search
	// settings override it).
	ToolSearch bool
	// ExemptServers are never deferred (for agents without their own
	// tool_search settings).
	ExemptServers []string
	// DeferredListMax is the largest deferred set listed name by name.
	DeferredListMax int
	// AutoPromoteTopK bounds routing auto-promotions.
	AutoPromoteTopK int
	// FailOpenListing lets listing proceed unfiltered when authz is
	// unreachable.
	FailOpenListing bool
	// CacheEntries bounds the base-assembly cache (0 disables it).
	CacheEntries int
	// CacheBytes bounds the estimated bytes the cached base assemblies
	// keep alive (0 = DefaultCacheBytes).
	CacheBytes int64
	// MaxDescriptionBytes and MaxSchemaBytes bound what of one MCP tool is
	// bound for the model (runtime.tool_bounds; 0 = unbounded).
	MaxDescriptionBytes, MaxSchemaBytes int
	// BootstrapAgent is runtime.bootstrap_agent: threads of this agent get
	// setup_agent ("" = none).
	BootstrapAgent string
	// ViewImage binds view_image: at least one runtime.loop.models entry
	// has supports_vision (the agent loop binds it only on turns of such a
	// model, docs/deerflow.md §1.6).
	ViewImage bool
}

// ConfigTool is one configured tool (runtime.tools entry).
type ConfigTool struct{ Name, Group, Use string }

// AgentResolver returns the agent of a thread (a subagent's override, a
// stored agent, or the default agent); its errors are gRPC status errors.
type AgentResolver interface {
	ThreadAgent(ctx context.Context, th *runtimestore.Thread) (*runtimev1.Agent, error)
}

// Metrics are the assembly's collectors; nil members are not recorded.
type Metrics struct {
	// Assemblies counts base assemblies by outcome (ok, cached, failed).
	Assemblies *prometheus.CounterVec
	// Promotions counts promoted names by origin.
	Promotions *prometheus.CounterVec
	// FailOpen counts listings that proceeded unfiltered.
	FailOpen prometheus.Counter
}

// Deps are the narrow dependencies of the Builder.
type Deps struct {
	Catalog catalogv1.CatalogServiceClient
	Authz   authzv1.AuthzServiceClient
	Skills  skillsv1.SkillsServiceClient
	// Store holds threads (promotions, slash activation, fail-open events).
	Store   runtimestore.Store
	Agents  AgentResolver
	Log     *slog.Logger
	Now     func() time.Time
	Metrics Metrics
}

// Builder runs the assembly pipeline (docs/architecture.md §3.1): the base
// assembly per principal and agent (cached while the catalog and policy
// watch streams are live), the per-thread View on top of it, and the
// AssembleTools use case.
type Builder struct {
	cfg     Settings
	catalog catalogv1.CatalogServiceClient
	// viewKey places the catalog reads that must agree with each other —
	// WatchCatalog, ListTools and the deferred-set hash — on one catalog
	// replica (random per process, so runtime replicas spread over the
	// catalogs; docs/decisions/0086-session-placement.md): replicas
	// converge, but a list read from one must not be cached under the
	// generation of another's watch stream.
	viewKey string
	authz   authzv1.AuthzServiceClient
	skills  skillsv1.SkillsServiceClient
	store   runtimestore.Store
	agents  AgentResolver
	log     *slog.Logger
	now     func() time.Time
	metrics Metrics
	watch   *watchState
	cache   *assemblyCache
}

// NewBuilder returns a Builder; call WatchCatalog and WatchPolicy in the
// background so that the cache is used.
func NewBuilder(cfg Settings, d Deps) *Builder {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return &Builder{cfg: cfg, catalog: d.Catalog, viewKey: "catalog-view\x00" + hex.EncodeToString(rnd[:]), authz: d.Authz, skills: d.Skills, store: d.Store, agents: d.Agents, log: d.Log, now: d.Now,
		metrics: d.Metrics, watch: &watchState{}, cache: newAssemblyCache(cfg.CacheEntries, cfg.CacheBytes)}
}

// FailedError is the fail-closed error of assembly; the runtime maps it
// to FAILED_PRECONDITION with reason ASSEMBLY_FAILED.
type FailedError struct{ Msg string }

// Error returns the message.
func (e *FailedError) Error() string { return e.Msg }

func assemblyFailed(format string, args ...any) error {
	return &FailedError{Msg: fmt.Sprintf(format, args...)}
}

// ShortErr bounds an error's text to 160 bytes for reports and messages.
func ShortErr(err error) string {
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return msg
}

func (s *Builder) threadAgent(ctx context.Context, th *runtimestore.Thread) (*runtimev1.Agent, error) {
	return s.agents.ThreadAgent(ctx, th)
}

func inc(c *prometheus.CounterVec, label string, n float64) {
	if c != nil {
		c.WithLabelValues(label).Add(n)
	}
}

// base returns the base assembly for the principal of ctx and the agent,
// from the cache when both watch streams are live.
func (s *Builder) base(ctx context.Context, th *runtimestore.Thread) (*Base, error) {
	agent, err := s.threadAgent(ctx, th)
	if err != nil {
		return nil, err
	}
	p := runtimeident.Principal(ctx)
	gen, pv, cacheable := s.watch.cacheKey()
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d", runtimeident.Key(p), agent.GetName(), agent.GetUpdateTime().AsTime().UnixNano(), gen, pv)
	if th.Child != nil {
		// A subagent's assembly differs (is_subagent, narrowed agent).
		key += "\x00subagent\x00" + agentDigest(agent)
	}
	if cacheable {
		if b := s.cache.get(key, s.now()); b != nil {
			inc(s.metrics.Assemblies, "cached", 1)
			return b, nil
		}
	}
	b, err := s.buildBase(ctx, p, agent, th)
	// Several authz replicas (docs/decisions/0085-policy-propagation.md):
	// the one that answered may not have loaded a policy version this
	// runtime was already told about (WatchPolicy, from another replica).
	// Such an assembly is never served nor cached: it is rebuilt (a
	// replica catches up within about a second) and otherwise refused.
	for wait := 25 * time.Millisecond; err == nil && b.PolicyVersion > 0 && b.PolicyVersion < s.watch.toldVersion(); wait *= 2 {
		if wait > 800*time.Millisecond {
			err = status.Errorf(codes.Unavailable, "authz answered with policy version %d, older than version %d already announced; retry", b.PolicyVersion, s.watch.toldVersion())
			break
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(wait):
		}
		b, err = s.buildBase(ctx, p, agent, th)
	}
	if err != nil {
		inc(s.metrics.Assemblies, "failed", 1)
		return nil, err
	}
	inc(s.metrics.Assemblies, "ok", 1)
	// Cache only what was decided with live streams, and never a fail-open
	// listing (it must be re-decided as soon as authz answers).
	if g2, pv2, ok := s.watch.cacheKey(); cacheable && ok && g2 == gen && pv2 == pv && !b.Report.GetAuthzFailOpen() {
		s.cache.put(key, b, gen, pv, s.now())
	}
	return b, nil
}

// onViewReplica places a catalog read on the replica of the watch stream.
func (s *Builder) onViewReplica(ctx context.Context) context.Context {
	ctx, _ = grpcx.WithPlacementKey(ctx, s.viewKey)
	return ctx
}

// catalogTools returns every catalog tool (cached per catalog generation).
func (s *Builder) catalogTools(ctx context.Context) ([]*catalogv1.Tool, error) {
	s.watch.mu.Lock()
	tools, gen, live := s.watch.tools, s.watch.catalogGen, s.watch.catalogLive
	s.watch.mu.Unlock()
	if tools != nil && live {
		return tools, nil
	}
	var all []*catalogv1.Tool
	token := ""
	lctx, pl := grpcx.WithPlacementKey(ctx, s.viewKey)
	for {
		resp, err := s.catalog.ListTools(lctx, &catalogv1.ListToolsRequest{PageSize: 1000, PageToken: token, IncludeHeld: true})
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
	if !s.watch.sameReplica(pl.Addr()) {
		// Read from another catalog replica than the watch stream's (the
		// view key moved): used, not cached; the stream follows.
		return all, nil
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
func (s *Builder) deferralSettings(a *runtimev1.Agent) (bool, []string) {
	if ts := a.GetToolSearch(); ts != nil {
		return ts.GetEnabled(), ts.GetExemptServers()
	}
	return s.cfg.ToolSearch, s.cfg.ExemptServers
}

// FilterBatch is the largest candidate list of one FilterResources call the
// runtime sends: authz caps one call at 10,000 candidates
// (services/authz/validate.go), so larger lists are filtered in batches
// (docs/decisions/0140-batched-candidate-filtering.md).
const FilterBatch = 5000

// filter asks authz which candidates the principal may list, in batches of
// FilterBatch. Every batch must be decided on the same policy version; when
// the policy moves between batches the whole list is filtered again, once.
// A failure is fail closed unless runtime.authz.fail_open_listing is on;
// then every candidate is kept and failOpen is true. Each batch carries the
// resource attributes of its own candidates.
func (s *Builder) filter(ctx context.Context, p *typev1.Principal, cc *typev1.CallContext, rt authzv1.ResourceType, names []string, attrs map[string]*authzv1.ResourceAttributes) (allowed map[string]bool, denied []*authzv1.DeniedResource, version int64, failOpen bool, err error) {
	allowed = make(map[string]bool, len(names))
	if len(names) == 0 {
		return allowed, nil, 0, false, nil
	}
	for attempt := 0; ; attempt++ {
		clear(allowed)
		denied, version, failOpen = nil, 0, false
		mixed := false
		for start := 0; start < len(names) && err == nil; start += FilterBatch {
			batch := names[start:min(start+FilterBatch, len(names))]
			var batchAttrs map[string]*authzv1.ResourceAttributes
			if len(attrs) > 0 {
				batchAttrs = make(map[string]*authzv1.ResourceAttributes, len(batch))
				for _, n := range batch {
					if a, ok := attrs[n]; ok {
						batchAttrs[n] = a
					}
				}
			}
			var resp *authzv1.FilterResourcesResponse
			resp, err = s.authz.FilterResources(runtimeident.ActingFor(ctx), &authzv1.FilterResourcesRequest{Principal: p, ResourceType: rt, Candidates: batch, Action: authzv1.Action_ACTION_LIST, CallContext: cc, ResourceAttributes: batchAttrs})
			if err != nil {
				break
			}
			if start > 0 && resp.GetPolicyVersion() != version {
				mixed = true
			}
			version = max(version, resp.GetPolicyVersion())
			for _, n := range resp.GetAllowed() {
				allowed[n] = true
			}
			denied = append(denied, resp.GetDenied()...)
			failOpen = failOpen || resp.GetFailOpen()
		}
		if err != nil {
			if !s.cfg.FailOpenListing {
				return nil, nil, 0, false, err
			}
			for _, n := range names {
				allowed[n] = true
			}
			return allowed, nil, 0, true, nil
		}
		if !mixed {
			return allowed, denied, version, failOpen, nil
		}
		if attempt > 0 {
			return nil, nil, 0, false, status.Errorf(codes.Aborted, "the policy changed while %d candidates were filtered in batches; retry", len(names))
		}
	}
}

// authzFailed is the fail-closed error of a filter step: "unreachable" only
// when authz could not be reached (UNAVAILABLE, DEADLINE_EXCEEDED); any
// other answer is reported as a refusal with its code.
func authzFailed(what string, err error) error {
	switch code := status.Code(err); code {
	case codes.Unavailable, codes.DeadlineExceeded:
		return assemblyFailed("authz unreachable while filtering %s (fail closed): %s", what, ShortErr(err))
	case codes.Aborted:
		return err // the caller retries the assembly
	default:
		return assemblyFailed("authz refused filtering %s (%s, fail closed): %s", what, code, ShortErr(err))
	}
}

func reasonText(d *authzv1.DeniedResource) string {
	if len(d.GetReasons()) == 0 {
		return d.GetName() + " (authz.denied)"
	}
	return d.GetName() + " (" + d.GetReasons()[0].GetCode() + ")"
}

// buildBase runs steps 1–4 of docs/architecture.md §3.1.
func (s *Builder) buildBase(ctx context.Context, p *typev1.Principal, agent *runtimev1.Agent, th *runtimestore.Thread) (*Base, error) {
	b := &Base{Agent: agent, ByName: map[string]*Tool{}, Deferred: map[string]*Tool{}, Report: &runtimev1.AssemblyReport{}, SkillsByName: map[string]*skillsv1.Skill{}}
	cc := runtimeident.CallContext(th, agent, "", "")

	// Skills visible to the principal (for describe_skill, the skills
	// section and slash activation): enabled, in the agent's allowlist,
	// allowed by authz. Skills being unreachable only removes skills.
	evolution := false
	if resp, err := s.skills.ListSkills(runtimeident.ActingFor(ctx), &skillsv1.ListSkillsRequest{EnabledOnly: true}); err != nil {
		b.SkillsNote = "skills unavailable: " + ShortErr(err)
		b.Report.Notes = append(b.Report.Notes, b.SkillsNote)
	} else {
		evolution = resp.GetEvolutionEnabled()
		var names []string
		for _, sk := range resp.GetSkills() {
			if sk.GetEnabled() && inList(agent.GetSkills(), sk.GetName()) {
				names = append(names, sk.GetName())
			}
		}
		allowed, _, _, failOpen, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_SKILL, names, nil)
		if err != nil {
			return nil, authzFailed("skills", err)
		}
		if failOpen {
			b.Report.AuthzFailOpen = true
		}
		for _, sk := range resp.GetSkills() {
			if allowed[sk.GetName()] {
				b.Skills = append(b.Skills, sk)
				b.SkillsByName[sk.GetName()] = sk
			}
		}
	}

	// 1. Sources by priority, first wins: config tools (2. filtered by the
	// agent's groups; bash only when allowed) → built-ins → catalog MCP tools.
	var cands []*Tool
	for _, tc := range s.cfg.Tools {
		if !inList(agent.GetToolGroups(), tc.Group) {
			continue
		}
		if (tc.Group == "bash" || tc.Use == "bash") && !s.cfg.AllowBash {
			continue
		}
		impl := ImplNames[tc.Use]
		if impl != tc.Name {
			b.Report.NameMismatches = append(b.Report.NameMismatches, fmt.Sprintf("%s (use %s binds as %s)", tc.Name, tc.Use, impl))
			s.log.WarnContext(ctx, "config tool name differs from its implementation; the implementation's name is bound", "name", tc.Name, "use", tc.Use, "bound", impl)
		}
		sp := ImplSpecs[tc.Use]
		cands = append(cands, &Tool{Name: impl, Description: sp.Description, Params: sp.Params, Source: SourceConfig, Use: tc.Use, Group: tc.Group})
	}
	builtins := []string{AskClarification, PresentFiles}
	if len(b.Skills) > 0 {
		builtins = append(builtins, DescribeSkill)
	}
	builtins = append(builtins, ReviewSkillPackage)
	builtins = append(builtins, s.conditionalBuiltins(th, evolution)...)
	if agent.GetSubagentsEnabled() {
		builtins = append(builtins, TaskTool)
	}
	if s.cfg.ViewImage {
		builtins = append(builtins, ViewImage)
	}
	for _, n := range builtins {
		cands = append(cands, BuiltinDef(n))
	}
	mcpTools, mcpCands, gen, memo, err := s.genCandidates(ctx)
	if err != nil {
		return nil, assemblyFailed("catalog unreachable: %s", ShortErr(err))
	}
	tenant := auth.TenantOf(p)
	for i, t := range mcpTools {
		// A tool of a tenant-scoped MCP server exists only for principals
		// of its tenants (docs/decisions/0105-tenant-scoped-servers.md);
		// the catalog refuses the others' calls as well.
		if ts := t.GetTenants(); len(ts) > 0 && !slices.Contains(ts, tenant) {
			continue
		}
		c := mcpCands[i]
		if c == nil { // held for review (PENDING, CHANGED, REJECTED)
			if b.Held == nil {
				b.Held = map[string]catalogv1.ToolState{}
			}
			b.Held[t.GetName()] = t.GetState()
			continue
		}
		if c.Truncated != "" {
			b.Report.Truncated = append(b.Report.Truncated, c.Name+": "+c.Truncated)
		}
		cands = append(cands, c)
	}
	acp, v0, err := s.acpTool(ctx, p, cc, b)
	if err != nil {
		return nil, err
	}
	if acp != nil {
		cands = append(cands, acp)
	}
	cands = append(cands, s.lateBuiltins(th, agent, p)...)
	seen := make(map[string]bool, len(cands))
	unique := make([]*Tool, 0, len(cands))
	for _, c := range cands {
		if c.Name == ToolSearchName || seen[c.Name] {
			b.Report.DroppedDuplicates = append(b.Report.DroppedDuplicates, c.Name+" ("+c.Source+")")
			s.log.WarnContext(ctx, "duplicate tool name dropped (first wins)", "name", c.Name, "source", c.Source)
			continue
		}
		seen[c.Name] = true
		unique = append(unique, c)
	}

	// 3. Authorization layer 1: mcp_server, then tool (fail closed).
	var servers []string
	serverSeen := map[string]bool{}
	for _, c := range unique {
		if c.Source == SourceMCP && !serverSeen[c.Server] {
			serverSeen[c.Server] = true
			servers = append(servers, c.Server)
		}
	}
	srvAllowed, srvDenied, v1, fo1, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER, servers, nil)
	if err != nil {
		return nil, authzFailed("mcp servers", err)
	}
	deniedServer := map[string]string{}
	for _, d := range srvDenied {
		deniedServer[d.GetName()] = reasonText(d)
	}
	names := make([]string, 0, len(unique))
	afterServers := make([]*Tool, 0, len(unique))
	attrs := make(map[string]*authzv1.ResourceAttributes, len(unique))
	for _, c := range unique {
		if c.Source == SourceMCP && !srvAllowed[c.Server] {
			b.Report.Denied = append(b.Report.Denied, c.Name+" (mcp_server "+FirstNonEmpty(deniedServer[c.Server], c.Server+" denied")+")")
			continue
		}
		afterServers = append(afterServers, c)
		names = append(names, c.Name)
		if a := c.ResourceAttributes(); a != nil {
			attrs[c.Name] = a
		}
	}
	b.ByName = make(map[string]*Tool, len(names))
	toolAllowed, toolDenied, v2, fo2, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_TOOL, names, attrs)
	if err != nil {
		return nil, authzFailed("tools", err)
	}
	for _, d := range toolDenied {
		b.Report.Denied = append(b.Report.Denied, reasonText(d))
	}
	b.PolicyVersion = max(v0, v1, v2)
	if fo1 || fo2 {
		b.Report.AuthzFailOpen = true
	}
	for _, c := range afterServers {
		if toolAllowed[c.Name] {
			b.Tools = append(b.Tools, c)
			b.ByName[c.Name] = c
		}
	}

	// 4. Deferral of the surviving MCP tools minus exempt servers; the
	// catalog hashes the deferred set.
	on, exempt := s.deferralSettings(agent)
	var deferrable []*Tool
	for _, c := range b.Tools {
		if c.Source == SourceMCP && on && !slices.Contains(exempt, c.Server) {
			deferrable = append(deferrable, c)
			if c.Routing.GetMode() == catalogv1.RoutingMode_ROUTING_MODE_PREFER && len(nonBlank(c.Routing.GetKeywords())) > 0 {
				b.Routes = append(b.Routes, c)
			}
			continue
		}
		b.Bound = append(b.Bound, c)
	}
	b.Deferred = map[string]*Tool{}
	if len(deferrable) > 0 {
		// The names, map and prompt section of the set, shared per
		// namespace and view key within the catalog generation.
		b.Namespace = tenant
		s.sharedDeferred(b, deferrable, gen, memo)
		setKey := b.NSKey()
		if memo, ok := s.watch.memoHash(setKey); ok {
			b.Hash = memo
		} else {
			s.watch.mu.Lock()
			gen := s.watch.catalogGen
			s.watch.mu.Unlock()
			// Acting for the principal: the catalog resolves the names in
			// its tenant's namespace (docs/decisions/0106-per-tenant-name-namespaces.md).
			resp, err := s.catalog.GetCatalog(s.onViewReplica(runtimeident.ActingFor(ctx)), &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: b.DeferredNames}})
			if err != nil {
				return nil, assemblyFailed("catalog hash of the deferred set unavailable (fail closed): %s", ShortErr(err))
			}
			if len(resp.GetUnknown()) > 0 {
				// The catalog moved between listing and hashing; the caller retries.
				return nil, status.Errorf(codes.Aborted, "catalog changed during assembly (%d tools vanished); retry", len(resp.GetUnknown()))
			}
			b.Hash = resp.GetCatalogHash()
			s.watch.putHash(gen, setKey, b.Hash)
		}
	}
	if on && len(deferrable) > 0 && (len(b.DeferredNames) == 0 || b.Hash == "") {
		return nil, assemblyFailed("deferral is on and %d tools are deferrable, but the deferred set is empty (fail closed)", len(deferrable))
	}
	b.Hints = routingHints(b.Tools, b.Deferred)
	if len(deferrable) == 0 {
		b.DeferredText = deferredSection(b, s.cfg.DeferredListMax)
	}
	b.SkillsText = skillsSection(b)
	return b, nil
}

// NSKey is the key of the deferred set in its namespace: Namespace, a 0x01
// byte and ViewKey ("" when nothing is deferred).
func (b *Base) NSKey() string {
	if b.ViewKey == "" {
		return ""
	}
	return b.Namespace + "\x01" + b.ViewKey
}

// viewKey is the hex SHA-256 of sorted names, each followed by NUL (Base.ViewKey).
func viewKey(names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FirstNonEmpty returns the first non-empty string of v, or "".
func FirstNonEmpty(v ...string) string {
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
// at most k (docs/deerflow.md §2.8).
func routeMatches(routes []*Tool, text string, k int) []string {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	low := strings.ToLower(text)
	var hits []*Tool
	for _, r := range routes {
		for _, kw := range nonBlank(r.Routing.GetKeywords()) {
			if strings.Contains(low, strings.ToLower(kw)) {
				hits = append(hits, r)
				break
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		pi, pj := hits[i].Routing.GetPriority(), hits[j].Routing.GetPriority()
		if pi != pj {
			return pi > pj
		}
		return hits[i].Name < hits[j].Name
	})
	var out []string
	for _, h := range hits {
		if len(out) == k {
			break
		}
		out = append(out, h.Name)
	}
	return out
}

// View is the thread's tool state for one turn on top of a base assembly.
type View struct {
	Base     *Base
	Thread   *runtimestore.Thread
	Promoted map[string]bool // deferred names bound as promoted this turn
	Order    []string        // promotion order
	Policy   *SkillPolicy    // nil = unrestricted
	// Dropped are promotions whose tool's definition changed (or v0.1.0
	// promotions under another catalog hash): not bound, to be removed from
	// the thread. Migrated are v0.1.0 promotions valid under the current
	// hash, now recorded with the tools' current definition hashes.
	Dropped  []*runtimev1.DroppedPromotion
	Migrated []*runtimev1.PromotedTool
	// Unavailable are promoted names not in the assembly right now (their
	// server is not connected, or the definition is held for review): they
	// stay promoted and are bound again when they return unchanged.
	Unavailable map[string]bool
}

// SkillPolicy is the resolved tool policy of the thread's active skills.
type SkillPolicy struct {
	Allowed map[string]bool
	Skills  []string
	Reason  string
}

// Allows reports whether the active skill policy allows a tool name.
func (v *View) Allows(name string) bool { return v.Policy == nil || v.Policy.Allowed[name] }

// Hidden reports whether a tool is deferred and not promoted under the
// assembly's hash.
func (v *View) Hidden(name string) bool {
	_, deferred := v.Base.Deferred[name]
	return deferred && !v.Promoted[name]
}

// View is the thread's tool state for one turn on top of a base assembly:
// the thread's promotions and the active skills' policy.
//
// A promotion records the exposed name and the definition hash it was
// promoted with; it is bound while the tool is in the deferred set with
// that same definition hash, whatever else changed in the catalog
// (docs/architecture.md §3.1, docs/decisions/0104). A changed definition
// drops it; a tool absent right now stays promoted (Unavailable). v0.1.0
// promotions (names under catalog_hash only) are migrated when
// catalog_hash is the assembly's hash, dropped otherwise (the old rule).
func (s *Builder) View(ctx context.Context, th *runtimestore.Thread, b *Base) *View {
	v := &View{Base: b, Thread: th, Promoted: map[string]bool{}, Unavailable: map[string]bool{}}
	pr := th.Proto.GetPromoted()
	promote := func(n string) {
		if !v.Promoted[n] {
			v.Promoted[n] = true
			v.Order = append(v.Order, n)
		}
	}
	for _, pt := range pr.GetTools() {
		n := pt.GetName()
		t, ok := b.Deferred[n]
		switch {
		case !ok:
			if _, bound := b.ByName[n]; !bound {
				v.Unavailable[n] = true
			}
		case t.DefinitionHash == pt.GetDefinitionHash():
			promote(n)
		default:
			v.Dropped = append(v.Dropped, &runtimev1.DroppedPromotion{Name: n, PromotedHash: pt.GetDefinitionHash(), CurrentHash: t.DefinitionHash,
				Reason: "the tool's definition changed since it was promoted; call tool_search to load it again"})
		}
	}
	if legacy := runtimestore.LegacyNames(pr); len(legacy) > 0 {
		valid := b.Hash != "" && pr.GetCatalogHash() == b.Hash
		for _, n := range legacy {
			t, ok := b.Deferred[n]
			switch {
			case valid && ok:
				promote(n)
				v.Migrated = append(v.Migrated, &runtimev1.PromotedTool{Name: n, DefinitionHash: t.DefinitionHash})
			case !valid:
				cur := ""
				if ok {
					cur = t.DefinitionHash
				}
				v.Dropped = append(v.Dropped, &runtimev1.DroppedPromotion{Name: n, CurrentHash: cur,
					Reason: "promoted under catalog hash " + pr.GetCatalogHash() + " (before per-tool definition hashes), which is not the current one; call tool_search to load it again"})
			}
		}
	}
	v.Policy = s.resolveSkillPolicy(ctx, th, b)
	return v
}

// PromotedUnavailable reports whether name is promoted in the thread but not
// in the assembly right now.
func (v *View) PromotedUnavailable(name string) bool { return v.Unavailable[name] }

// PromotionsFor returns the promotion record of deferred names (each with
// its current definition hash) under the assembly's hash.
func (b *Base) PromotionsFor(names []string) *runtimev1.Promoted {
	p := &runtimev1.Promoted{CatalogHash: b.Hash, Names: names}
	for _, n := range names {
		if t, ok := b.Deferred[n]; ok {
			p.Tools = append(p.Tools, &runtimev1.PromotedTool{Name: n, DefinitionHash: t.DefinitionHash})
		}
	}
	return p
}

// activeSkills returns the skills whose policy applies: slash-activated
// skills dominate; otherwise skills activated by reading SKILL.md (the most
// recent 8) (docs/deerflow.md §4.9).
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
func (s *Builder) resolveSkillPolicy(ctx context.Context, th *runtimestore.Thread, b *Base) *SkillPolicy {
	act := activeSkills(th)
	if len(act) == 0 {
		return nil
	}
	req := &skillsv1.ResolveSkillPolicyRequest{Allowlist: b.Agent.GetSkills(), AlwaysAvailable: AlwaysAvailable}
	var names []string
	for _, a := range act {
		req.ActiveSkills = append(req.ActiveSkills, &skillsv1.ActiveSkill{Name: a.GetName(), Digest: a.GetDigest()})
		names = append(names, a.GetName())
	}
	pol := &SkillPolicy{Allowed: map[string]bool{}, Skills: names}
	resp, err := s.skills.ResolveSkillPolicy(runtimeident.ActingFor(ctx), req)
	if err != nil {
		for _, n := range AlwaysAvailable {
			pol.Allowed[n] = true
		}
		pol.Reason = "skill policy unavailable (fail closed): " + ShortErr(err)
		return pol
	}
	if resp.GetPolicy().GetUnrestricted() && len(resp.GetPolicy().GetUnresolved()) == 0 {
		return nil
	}
	for _, n := range resp.GetPolicy().GetAllowedTools() {
		pol.Allowed[n] = true
	}
	for _, n := range AlwaysAvailable {
		pol.Allowed[n] = true
	}
	pol.Reason = resp.GetPolicy().GetReason()
	return pol
}

// boundTools returns the tools to bind: non-deferred tools, tool_search
// when the deferred set is non-empty, and promoted tools — then narrowed by
// the skill policy (docs/architecture.md §3.1 steps 4–6).
func (v *View) BoundTools() (bound []*Tool, skillFiltered []string) {
	var all []*Tool
	all = append(all, v.Base.Bound...)
	if v.Base.HasDeferred() {
		all = append(all, BuiltinDef(ToolSearchName))
	}
	for _, n := range v.Order {
		all = append(all, v.Base.Deferred[n])
	}
	for _, t := range all {
		if !v.Allows(t.Name) {
			skillFiltered = append(skillFiltered, t.Name)
			continue
		}
		bound = append(bound, t)
	}
	return bound, skillFiltered
}

// Assemble runs the assembly pipeline (docs/architecture.md §3.1) for the next
// model call of a thread: slash activation, the base assembly (sources,
// groups, authz layer 1, deferral and hash), promotions under the hash plus
// routing auto-promotions from user_message, and the skill policy last.
//
// The tools are bound in profile's form (Bind); one that cannot be made
// valid is left out and named in report.left_out.
//
// th is the caller's own thread (loaded by the runtime). Errors are gRPC
// status errors, a *FailedError, or store errors (the runtime maps them).
func (s *Builder) Assemble(ctx context.Context, th *runtimestore.Thread, userMessage string, profile runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error) {
	b, err := s.Build(ctx, th)
	if err != nil {
		return nil, err
	}
	resp := &runtimev1.AssembleToolsResponse{CatalogHash: b.Hash, PolicyVersion: b.PolicyVersion, Deferred: b.DeferredNames, DeferredView: b.ViewKey}
	report := proto.Clone(b.Report).(*runtimev1.AssemblyReport)
	if report.AuthzFailOpen {
		s.recordFailOpen(ctx, th.Proto.GetThreadId(), "assembly proceeded unfiltered: authz unreachable and runtime.authz.fail_open_listing is on")
	}

	// Slash activation (docs/deerflow.md §4.7).
	var activation *runtimev1.PromptSection
	if name, task, ok := ParseSlash(userMessage); ok {
		th, activation, resp.DirectAnswer, resp.ActivatedSkill, err = s.activateSlash(ctx, th, b, name, task)
		if err != nil {
			return nil, err
		}
		if resp.DirectAnswer != "" {
			resp.SkipModel = true
		}
	}

	// Routing auto-promotions (docs/deerflow.md §2.8).
	if b.HasDeferred() && len(b.Routes) > 0 {
		if names := routeMatches(b.Routes, userMessage, s.cfg.AutoPromoteTopK); len(names) > 0 {
			report.AutoPromoted = names
			th, err = s.store.UpdateThread(ctx, th.Proto.GetThreadId(), func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
				t.Proto.Promoted = runtimestore.MergePromoted(t.Proto.Promoted, b.PromotionsFor(names))
				return nil, nil
			})
			if err != nil {
				return nil, err
			}
			inc(s.metrics.Promotions, "routing", float64(len(names)))
		}
	}

	v := s.View(ctx, th, b)
	if th, err = s.settlePromotions(ctx, th, v, report); err != nil {
		return nil, err
	}
	bound, filtered := v.BoundTools()
	report.SkillFiltered = filtered
	if v.Policy != nil && v.Policy.Reason != "" {
		report.Notes = append(report.Notes, "skill policy: "+v.Policy.Reason)
	}
	// Bound forms come from the catalog generation's memo
	// (docs/decisions/0149-assembly-shared-per-catalog-generation.md); gen
	// is the generation now, so a base built on an older one binds fresh.
	gen, _, _ := s.watch.cacheKey()
	for _, t := range bound {
		ts, err := s.bindMemo(gen, t, profile, false)
		if err != nil {
			// A tool that cannot be made valid for the profile is left out
			// with its reason; it never breaks the request.
			report.LeftOut = append(report.LeftOut, t.Name+": "+leftOutReason(err))
			continue
		}
		resp.Tools = append(resp.Tools, ts)
	}
	if NativeDeferral(profile, v) {
		n := 0
		view := sha256.New()
		for _, t := range UnpromotedDeferred(v) {
			ts, formHash, err := s.bindDeferred(gen, t, profile)
			if err != nil {
				report.LeftOut = append(report.LeftOut, t.Name+": "+leftOutReason(err))
				continue
			}
			resp.Tools = append(resp.Tools, ts)
			view.Write([]byte(ts.GetName()))
			view.Write([]byte{0})
			view.Write([]byte(formHash))
			view.Write([]byte{0})
			n++
		}
		if n > 0 {
			resp.DeferredToolsView = hex.EncodeToString(view.Sum(nil))
		}
		if profile == runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES {
			for _, ts := range resp.Tools {
				if ts.GetName() != ToolSearchName {
					continue
				}
				if s, err := structpb.NewStruct(ResponsesToolSearch(BuiltinDef(ToolSearchName))); err == nil {
					ts.Bound = s
				}
			}
			report.Notes = append(report.Notes, fmt.Sprintf("openai_responses: %d deferred functions bound with defer_loading; tool_search is client-executed (execution: client) and its result is the tool_search_output item in ToolResult.provider_output", n))
		} else {
			report.Notes = append(report.Notes, fmt.Sprintf("anthropic_messages: %d deferred tools bound with defer_loading; tool_search answers with tool_reference blocks", n))
		}
	} else if profile == runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES && len(b.DeferredNames) > AnthropicDeferredMax {
		report.Notes = append(report.Notes, fmt.Sprintf("anthropic_messages: %d deferred tools, over the %d the Messages API accepts with defer_loading: names in the prompt, tool_search returns definitions", len(b.DeferredNames), AnthropicDeferredMax))
	}
	resp.PromptSections = s.promptSections(b, activation)
	resp.Report = report
	return resp, nil
}

func leftOutReason(err error) string {
	var lo *runtimeschema.LeftOut
	if errors.As(err, &lo) {
		return string(lo.Profile) + ": " + lo.Reason
	}
	return err.Error()
}

// Build builds the base assembly of a thread (from the cache when both
// watch streams are live), retrying once when the catalog moved during
// assembly.
func (s *Builder) Build(ctx context.Context, th *runtimestore.Thread) (*Base, error) {
	b, err := s.base(ctx, th)
	if status.Code(err) == codes.Aborted {
		s.watch.invalidate()
		b, err = s.base(ctx, th)
	}
	return b, err
}

// settlePromotions persists what the view decided about the thread's
// promotions: dropped ones are removed (each reported in the assembly
// report and as a thread event "promotion.dropped"), v0.1.0 ones valid under
// the current hash are rewritten with definition hashes
// ("promotion.migrated"). Unavailable ones are reported and kept.
func (s *Builder) settlePromotions(ctx context.Context, th *runtimestore.Thread, v *View, report *runtimev1.AssemblyReport) (*runtimestore.Thread, error) {
	report.DroppedPromotions = v.Dropped
	for _, n := range v.Base.sortedUnavailable(v.Unavailable) {
		report.PromotedUnavailable = append(report.PromotedUnavailable, n)
	}
	if len(v.Dropped) == 0 && len(v.Migrated) == 0 {
		return th, nil
	}
	drop := make([]string, len(v.Dropped))
	for i, d := range v.Dropped {
		drop[i] = d.GetName()
	}
	id := th.Proto.GetThreadId()
	th, err := s.store.UpdateThread(ctx, id, func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
		p := runtimestore.DropPromoted(t.Proto.Promoted, drop)
		if len(v.Migrated) > 0 {
			p = runtimestore.MergePromoted(p, &runtimev1.Promoted{CatalogHash: p.GetCatalogHash(), Tools: v.Migrated})
		}
		t.Proto.Promoted = p
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range v.Dropped {
		detail := fmt.Sprintf("%s: %s (promoted %s, current %s)", d.GetName(), d.GetReason(), FirstNonEmpty(d.GetPromotedHash(), "-"), FirstNonEmpty(d.GetCurrentHash(), "-"))
		if err := s.store.AppendEvent(context.WithoutCancel(ctx), runtimestore.Event{ThreadID: id, Kind: "promotion.dropped", Detail: detail}); err != nil {
			s.log.ErrorContext(ctx, "record promotion.dropped event", "error", err)
		}
	}
	if len(v.Migrated) > 0 {
		names := make([]string, len(v.Migrated))
		for i, m := range v.Migrated {
			names[i] = m.GetName()
		}
		detail := "v0.1.0 promotions recorded with their current definition hashes: " + strings.Join(names, ", ")
		if err := s.store.AppendEvent(context.WithoutCancel(ctx), runtimestore.Event{ThreadID: id, Kind: "promotion.migrated", Detail: detail}); err != nil {
			s.log.ErrorContext(ctx, "record promotion.migrated event", "error", err)
		}
	}
	inc(s.metrics.Promotions, "dropped", float64(len(v.Dropped)))
	return th, nil
}

func (b *Base) sortedUnavailable(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *Builder) recordFailOpen(ctx context.Context, threadID, detail string) {
	if s.metrics.FailOpen != nil {
		s.metrics.FailOpen.Inc()
	}
	s.log.WarnContext(ctx, "authz fail-open listing", "thread", threadID)
	if err := s.store.AppendEvent(context.WithoutCancel(ctx), runtimestore.Event{ThreadID: threadID, Kind: "authz.fail_open", Detail: detail}); err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
		s.log.ErrorContext(ctx, "record fail-open event", "error", err)
	}
}

// Invalidate drops the cached catalog tool list (the catalog moved without
// an event reaching the runtime yet).
func (s *Builder) Invalidate() { s.watch.invalidate() }

// CacheLive reports whether cached assemblies are used (both watch streams
// live).
func (s *Builder) CacheLive() bool {
	_, _, ok := s.watch.cacheKey()
	return ok
}
