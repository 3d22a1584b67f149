package runtimetest

import (
	"context"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// FakeAuthz is an in-memory AuthzService: everything is allowed unless a
// name is listed in DenyList (FilterResources) or DenyCall (Authorize).
// Down makes every RPC fail with UNAVAILABLE (authz unreachable).
type FakeAuthz struct {
	authzv1.UnimplementedAuthzServiceServer
	mu             sync.Mutex
	denyList       map[string]bool // "<type>/<name>"
	denyCall       map[string]bool // tool name
	version        int64
	changed        chan struct{}
	Down           atomic.Bool
	AuthorizeCalls atomic.Int64 // number of Authorize calls
	Filters        atomic.Int64 // number of FilterResources calls
	// Lag makes FilterResources answer this many versions behind the one
	// WatchPolicy announces (an authz replica that has not reloaded yet).
	Lag atomic.Int64
}

// NewFakeAuthz returns a FakeAuthz at policy version 1.
func NewFakeAuthz() *FakeAuthz {
	return &FakeAuthz{denyList: map[string]bool{}, denyCall: map[string]bool{}, version: 1, changed: make(chan struct{})}
}

func key(rt authzv1.ResourceType, name string) string { return rt.String() + "/" + name }

// DenyList denies listing name of type rt and bumps the policy version.
func (f *FakeAuthz) DenyList(rt authzv1.ResourceType, name string) {
	f.mu.Lock()
	f.denyList[key(rt, name)] = true
	f.bumpLocked()
	f.mu.Unlock()
}

// DenyCall denies calling the tool and bumps the policy version.
func (f *FakeAuthz) DenyCall(tool string) {
	f.mu.Lock()
	f.denyCall[tool] = true
	f.bumpLocked()
	f.mu.Unlock()
}

// SetDown makes the fake unreachable (every RPC UNAVAILABLE, open watch
// streams end) or reachable again.
func (f *FakeAuthz) SetDown(down bool) {
	f.mu.Lock()
	f.Down.Store(down)
	f.bumpLocked()
	f.mu.Unlock()
}

// Bump increases the policy version without changing decisions.
func (f *FakeAuthz) Bump() {
	f.mu.Lock()
	f.bumpLocked()
	f.mu.Unlock()
}

func (f *FakeAuthz) bumpLocked() {
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

// FilterResources implements the RPC.
func (f *FakeAuthz) FilterResources(_ context.Context, r *authzv1.FilterResourcesRequest) (*authzv1.FilterResourcesResponse, error) {
	f.Filters.Add(1)
	if f.Down.Load() {
		return nil, status.Error(codes.Unavailable, "fake authz is down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &authzv1.FilterResourcesResponse{PolicyVersion: f.version - f.Lag.Load()}
	for _, c := range r.GetCandidates() {
		if f.denyList[key(r.GetResourceType(), c)] {
			resp.Denied = append(resp.Denied, &authzv1.DeniedResource{Name: c, Reasons: []*authzv1.Reason{{Code: "authz.denied", Message: "denied by the test policy"}}})
			continue
		}
		resp.Allowed = append(resp.Allowed, c)
	}
	return resp, nil
}

// Authorize implements the RPC.
func (f *FakeAuthz) Authorize(_ context.Context, r *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	f.AuthorizeCalls.Add(1)
	if f.Down.Load() {
		return nil, status.Error(codes.Unavailable, "fake authz is down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.denyCall[r.GetTarget()] || f.denyList[key(r.GetResourceType(), r.GetTarget())] {
		return &authzv1.AuthorizeResponse{Decision: &authzv1.Decision{Allow: false, PolicyVersion: f.version,
			Reasons: []*authzv1.Reason{{Code: "authz.denied", Message: "calling " + r.GetTarget() + " is denied by the test policy"}}}}, nil
	}
	return &authzv1.AuthorizeResponse{Decision: &authzv1.Decision{Allow: true, PolicyVersion: f.version, Reasons: []*authzv1.Reason{{Code: "authz.allowed"}}}}, nil
}

// WatchPolicy implements the RPC: the current version, then every change.
func (f *FakeAuthz) WatchPolicy(_ *authzv1.WatchPolicyRequest, stream grpc.ServerStreamingServer[authzv1.WatchPolicyResponse]) error {
	for {
		if f.Down.Load() {
			return status.Error(codes.Unavailable, "fake authz is down")
		}
		f.mu.Lock()
		v, ch := f.version, f.changed
		f.mu.Unlock()
		if err := stream.Send(&authzv1.WatchPolicyResponse{PolicyVersion: v}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// FakeSkill is one skill of FakeSkills.
type FakeSkill struct {
	Skill *skillsv1.Skill
	Files map[string]string
}

// FakeSkills is an in-memory SkillsService with the policy semantics of
// docs/deerflow.md §4.9 (union of allowed-tools; none declared =
// unrestricted; an unresolvable active skill fails closed).
type FakeSkills struct {
	skillsv1.UnimplementedSkillsServiceServer
	mu     sync.Mutex
	skills map[string]*FakeSkill
	Down   atomic.Bool
	Reads  atomic.Int64
}

// NewFakeSkills returns an empty FakeSkills.
func NewFakeSkills() *FakeSkills { return &FakeSkills{skills: map[string]*FakeSkill{}} }

// Put adds or replaces a public skill with SKILL.md body and allowed tools
// (nil = not declared).
func (f *FakeSkills) Put(name, description string, enabled bool, allowedTools []string, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sk := &skillsv1.Skill{Name: name, Description: description, Category: skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC, Enabled: enabled,
		AllowedTools: allowedTools, HasAllowedTools: allowedTools != nil, Digest: "digest-" + name, Path: "/mnt/skills/public/" + name, Files: []string{"SKILL.md"}}
	f.skills[name] = &FakeSkill{Skill: sk, Files: map[string]string{"SKILL.md": body}}
}

func (f *FakeSkills) check() error {
	if f.Down.Load() {
		return status.Error(codes.Unavailable, "fake skills is down")
	}
	return nil
}

// ListSkills implements the RPC.
func (f *FakeSkills) ListSkills(_ context.Context, r *skillsv1.ListSkillsRequest) (*skillsv1.ListSkillsResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &skillsv1.ListSkillsResponse{}
	for _, s := range f.skills {
		if r.GetEnabledOnly() && !s.Skill.GetEnabled() {
			continue
		}
		resp.Skills = append(resp.Skills, s.Skill)
	}
	slices.SortFunc(resp.Skills, func(a, b *skillsv1.Skill) int { return strings.Compare(a.GetName(), b.GetName()) })
	return resp, nil
}

// GetSkill implements the RPC.
func (f *FakeSkills) GetSkill(_ context.Context, r *skillsv1.GetSkillRequest) (*skillsv1.GetSkillResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.skills[r.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", r.GetName())
	}
	return &skillsv1.GetSkillResponse{Skill: s.Skill}, nil
}

// ReadSkillFile implements the RPC.
func (f *FakeSkills) ReadSkillFile(_ context.Context, r *skillsv1.ReadSkillFileRequest) (*skillsv1.ReadSkillFileResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.Reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.skills[r.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", r.GetName())
	}
	body, ok := s.Files[r.GetPath()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "file %q not found", r.GetPath())
	}
	return &skillsv1.ReadSkillFileResponse{Content: []byte(body), SkillDigest: s.Skill.GetDigest(), Category: s.Skill.GetCategory()}, nil
}

// ResolveSkillPolicy implements the RPC.
func (f *FakeSkills) ResolveSkillPolicy(_ context.Context, r *skillsv1.ResolveSkillPolicyRequest) (*skillsv1.ResolveSkillPolicyResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pol := &skillsv1.SkillPolicy{}
	declared := false
	allowed := map[string]bool{}
	for _, a := range r.GetActiveSkills() {
		s, ok := f.skills[a.GetName()]
		inAllow := r.GetAllowlist() == nil || slices.Contains(r.GetAllowlist().GetValues(), a.GetName())
		if !ok || !s.Skill.GetEnabled() || !inAllow {
			pol.Unresolved = append(pol.Unresolved, a.GetName())
			continue
		}
		if s.Skill.GetHasAllowedTools() {
			declared = true
			for _, t := range s.Skill.GetAllowedTools() {
				allowed[t] = true
			}
		}
	}
	switch {
	case len(pol.Unresolved) > 0:
		pol.AllowedTools = r.GetAlwaysAvailable()
		pol.Reason = "unresolved active skills: " + strings.Join(pol.Unresolved, ", ")
	case !declared:
		pol.Unrestricted = true
	default:
		for t := range allowed {
			pol.AllowedTools = append(pol.AllowedTools, t)
		}
		pol.AllowedTools = append(pol.AllowedTools, r.GetAlwaysAvailable()...)
		slices.Sort(pol.AllowedTools)
		pol.Reason = "allowed-tools of the active skills"
	}
	return &skillsv1.ResolveSkillPolicyResponse{Policy: pol}, nil
}

// DescribeSkills implements the RPC with the select: form and a
// case-insensitive regex over "name description".
func (f *FakeSkills) DescribeSkills(_ context.Context, r *skillsv1.DescribeSkillsRequest) (*skillsv1.DescribeSkillsResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &skillsv1.DescribeSkillsResponse{}
	q := strings.TrimSpace(r.GetQuery())
	var names []string
	for n := range f.skills {
		names = append(names, n)
	}
	slices.Sort(names)
	re, err := regexp.Compile("(?i)" + q)
	if err != nil {
		re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(q))
	}
	for _, n := range names {
		s := f.skills[n]
		if r.GetAllowlist() != nil && !slices.Contains(r.GetAllowlist().GetValues(), n) {
			continue
		}
		if sel, ok := strings.CutPrefix(q, "select:"); ok {
			if slices.Contains(strings.Split(sel, ","), n) {
				resp.Matches = append(resp.Matches, &skillsv1.SkillMatch{Skill: s.Skill, Score: 1})
			}
			continue
		}
		if re.MatchString(n + " " + s.Skill.GetDescription()) {
			resp.Matches = append(resp.Matches, &skillsv1.SkillMatch{Skill: s.Skill, Score: 1})
		}
	}
	return resp, nil
}

// ReviewSkillPackage implements the RPC for installed skills.
func (f *FakeSkills) ReviewSkillPackage(_ context.Context, r *skillsv1.ReviewSkillPackageRequest) (*skillsv1.ReviewSkillPackageResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.skills[r.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "skill %q not found", r.GetName())
	}
	return &skillsv1.ReviewSkillPackageResponse{Facts: &skillsv1.ReviewFacts{Subject: r.GetName(), Digest: s.Skill.GetDigest(), Complete: true},
		Text: `{"facts":{"subject":"` + r.GetName() + `"},"untrusted_review_data":true}`, FullReport: `{"report":"full"}`}, nil
}

// Serve serves the fakes (either may be nil) on 127.0.0.1 with gRPC health
// SERVING for both service names, and returns the address. The server stops
// with the test.
func Serve(t testing.TB, az *FakeAuthz, sk *FakeSkills) string {
	return ServeAll(t, nil, az, sk)
}

// ServeAll is Serve with a catalog fake as well (nil = not served).
func ServeAll(t testing.TB, cat *FakeCatalog, az *FakeAuthz, sk *FakeSkills) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	if cat != nil {
		catalogv1.RegisterCatalogServiceServer(srv, cat)
		hs.SetServingStatus(catalogv1.CatalogService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if az != nil {
		authzv1.RegisterAuthzServiceServer(srv, az)
		hs.SetServingStatus(authzv1.AuthzService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if sk != nil {
		skillsv1.RegisterSkillsServiceServer(srv, sk)
		hs.SetServingStatus(skillsv1.SkillsService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
