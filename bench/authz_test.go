// Package bench holds the suite's benchmarks. Authz (issue 5):
//
//	go test -run '^$' -bench Authz -benchtime 2s ./bench/
//
// BenchmarkAuthzDecide compares, on one policy of 1,000 roles and 10,000
// lines, the indexed decision path (with and without the decision cache)
// against plain Casbin Enforce (the oracle). BenchmarkAuthzFilter decides
// 2,000 candidates per FilterResources call. BenchmarkAuthzGRPC measures
// Authorize over a loopback gRPC connection with the full interceptor chain
// (authentication, class check, validation), reporting decisions/s and p99.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/authz"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

const (
	benchRoles = 1000
	benchLines = 10000
)

var benchTenants = []string{"*", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}

// largePolicy builds 1,000 roles × 10 lines (literal targets, prefix globs,
// a few other globs, ~10% denies, a few conditional lines) and a role tree
// (role i inherits role i/10).
func largePolicy() authzcasbin.PolicySet {
	r := rand.New(rand.NewPCG(7, 9))
	set := authzcasbin.PolicySet{Version: 1}
	seen := map[string]bool{}
	for len(set.Rules) < benchLines {
		role := fmt.Sprintf("role%d", r.IntN(benchRoles))
		var target string
		switch k := r.IntN(10); {
		case k < 6:
			target = fmt.Sprintf("srv%d_tool%d", r.IntN(100), r.IntN(50))
		case k < 9:
			target = fmt.Sprintf("srv%d_*", r.IntN(100))
		default:
			target = fmt.Sprintf("srv%d_tool?%d", r.IntN(100), r.IntN(10))
		}
		rule := authzcasbin.Rule{
			Subject: role, Tenant: benchTenants[r.IntN(len(benchTenants))], Resource: authzcasbin.ResourceTypes[r.IntN(2)],
			Target: target, Action: authzcasbin.Actions[r.IntN(3)], Effect: authzcasbin.EffectAllow,
		}
		if r.IntN(10) == 0 {
			rule.Effect = authzcasbin.EffectDeny
		}
		if r.IntN(50) == 0 {
			rule.Condition = "!subagent"
		}
		if seen[rule.ID()] {
			continue
		}
		seen[rule.ID()] = true
		set.Rules = append(set.Rules, rule)
	}
	for i := 1; i < benchRoles; i++ {
		set.Links = append(set.Links, authzcasbin.Link{Member: fmt.Sprintf("role%d", i), Role: fmt.Sprintf("role%d", i/10), Tenant: "*"})
	}
	return set
}

func benchRequests(n int) []authzcasbin.Request {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]authzcasbin.Request, n)
	for i := range out {
		out[i] = authzcasbin.Request{
			Subject: fmt.Sprintf("u%d", r.IntN(500)), Tenant: fmt.Sprintf("t%d", r.IntN(10)),
			Roles:    []string{fmt.Sprintf("role%d", r.IntN(benchRoles)), fmt.Sprintf("role%d", r.IntN(benchRoles))},
			Resource: authzcasbin.ResourceTool, Action: authzcasbin.ActionCall,
			Target: fmt.Sprintf("srv%d_tool%d", r.IntN(100), r.IntN(50)),
			Cond:   authzcasbin.CondInput{CallTime: true, Input: map[string]any{}},
		}
	}
	return out
}

var (
	benchOnce   sync.Once
	benchEngine *authzcasbin.Engine
)

func engine(b *testing.B) *authzcasbin.Engine {
	benchOnce.Do(func() {
		e, err := authzcasbin.NewEngine("")
		if err != nil {
			panic(err)
		}
		if err := e.Load(largePolicy()); err != nil {
			panic(err)
		}
		benchEngine = e
	})
	return benchEngine
}

// BenchmarkAuthzDecide: one decision per op on 1,000 roles / 10,000 lines.
func BenchmarkAuthzDecide(b *testing.B) {
	e := engine(b)
	reqs := benchRequests(4096)
	// Plain Casbin Enforce over the same policy (one EnforceEx per subject),
	// with the tenants' role managers stored up front as the engine's Casbin
	// path does (Casbin otherwise builds a temporary role manager, copying
	// every "*" link, on each g() call: tens of seconds per decision here).
	ce, err := authzcasbin.NewCasbinEnforcer(authzcasbin.DefaultModel, largePolicy())
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range benchTenants[1:] {
		_ = ce.GetRoleManager().DeleteLink("\x00warm", "\x00warm", t) // stores the tenant's role manager, adds no link
	}
	casbinDecide := func(r *authzcasbin.Request) authzcasbin.Decision {
		subs := append(slices.Clone(r.Roles), authzcasbin.UserPrefix+r.Subject)
		allow, denied := false, false
		for _, sub := range subs {
			ok, explain, err := ce.EnforceEx(sub, r.Tenant, r.Resource, r.Target, r.Action, &r.Cond)
			if err != nil {
				b.Fatal(err)
			}
			if !ok && len(explain) > 0 {
				denied = true
			}
			allow = allow || ok
		}
		return authzcasbin.Decision{Allow: allow && !denied}
	}
	// Sanity: the paths agree on these requests.
	for i := 0; i < 5; i++ {
		if x, y := e.Decide(&reqs[i]), casbinDecide(&reqs[i]); x.Allow != y.Allow {
			b.Fatalf("index and Casbin disagree on %+v: %+v vs %+v", reqs[i], x, y)
		}
	}
	paths := []struct {
		name string
		fn   func(*authzcasbin.Request) authzcasbin.Decision
	}{
		{"indexed-cached", e.Decide},
		{"indexed-uncached", e.DecideUncached},
		{"casbin-enforce", casbinDecide},
		{"casbin-oracle", e.DecideOracle}, // + reasons and the condition-blocked pass
	}
	for _, c := range paths {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			allows := 0
			for i := 0; b.Loop(); i++ {
				if c.fn(&reqs[i%len(reqs)]).Allow {
					allows++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/decision")
		})
	}
}

// BenchmarkAuthzFilter: one FilterResources evaluation of 2,000 candidates
// per op (engine level, one snapshot), cached and uncached.
func BenchmarkAuthzFilter(b *testing.B) {
	e := engine(b)
	r := rand.New(rand.NewPCG(5, 6))
	cands := make([]string, 2000)
	for i := range cands {
		cands[i] = fmt.Sprintf("srv%d_tool%d", r.IntN(100), r.IntN(50))
	}
	req := &authzcasbin.Request{Subject: "u1", Tenant: "t3", Roles: []string{"role17", "role345"}, Resource: authzcasbin.ResourceTool, Action: authzcasbin.ActionList}
	b.Run("engine", func(b *testing.B) {
		for b.Loop() {
			ds, _ := e.DecideAll(req, cands)
			if len(ds) != len(cands) {
				b.Fatal("short")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/call")
	})
	// Over gRPC loopback with the full chain (includes the summary record).
	h := startServer(b, largePolicy())
	preq := &authzv1.FilterResourcesRequest{Principal: &typev1.Principal{Subject: "u1", Tenant: "t3", Roles: []string{"role17", "role345"}},
		ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Candidates: cands}
	b.Run("grpc", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.client.FilterResources(context.Background(), preq); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/call")
	})
}

type benchServer struct {
	client authzv1.AuthzServiceClient
}

type classTable struct{ s *authz.Server }

func (p classTable) Class(m string) auth.Class {
	if c, ok := p.s.Classes()[m]; ok {
		return c
	}
	return auth.ClassUnknown
}
func (p classTable) Validate(m string, req any) error { return p.s.Validate(m, req) }

// startServer runs the authz service on a loopback listener with the shared
// interceptor chain and loads the given policy through AddPolicies.
func startServer(b *testing.B, set authzcasbin.PolicySet) *benchServer {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := authz.New(context.Background(), authz.Config{}, svckit.Env{DataDir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	a, _ := auth.NewAuthenticator(auth.Options{Enabled: true})
	a.AddToken("svc", "svc-token", auth.KindService, &typev1.Principal{Subject: "runtime", Roles: []string{"admin"}})
	gs := grpc.NewServer(grpcx.ServerOptions(grpcx.ChainOptions{Logger: log, Metrics: grpcprom.NewServerMetrics(), Authenticator: a, Policy: classTable{srv}})...)
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(lis)
	cc, err := grpcx.Dial(lis.Addr().String(), grpcx.DialOptions{Token: "svc-token", MaxMessageBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cc.Close()
		gs.Stop()
		srv.Close()
	})
	client := authzv1.NewAuthzServiceClient(cc)
	var ps []*authzv1.Policy
	for _, r := range set.Rules {
		p := &authzv1.Policy{Role: r.Subject, Tenant: r.Tenant, Target: r.Target,
			ResourceType: map[string]authzv1.ResourceType{"tool": 1, "skill": 2, "model": 3, "mcp_server": 4}[r.Resource],
			Action:       map[string]authzv1.Action{"list": 1, "call": 2, "use": 3}[r.Action],
			Effect:       authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}
		if r.Effect == authzcasbin.EffectDeny {
			p.Effect = authzv1.PolicyEffect_POLICY_EFFECT_DENY
		}
		if r.Condition != "" {
			p.Conditions = []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: r.Condition}}}
		}
		ps = append(ps, p)
	}
	var ls []*authzv1.RoleLink
	for _, l := range set.Links {
		ls = append(ls, &authzv1.RoleLink{Member: l.Member, Role: l.Role, Tenant: l.Tenant})
	}
	if _, err := client.AddPolicies(context.Background(), &authzv1.AddPoliciesRequest{Policies: ps, RoleLinks: ls}); err != nil {
		b.Fatal(err)
	}
	return &benchServer{client: client}
}

// grantedRequests builds requests that a rule of the policy grants (the
// principal holds the rule's role; literal targets as written, prefix globs
// completed), which are mostly allowed, the realistic case for Authorize.
func grantedRequests(set authzcasbin.PolicySet, n int) []*authzv1.AuthorizeRequest {
	r := rand.New(rand.NewPCG(11, 12))
	var out []*authzv1.AuthorizeRequest
	for len(out) < n {
		rule := set.Rules[r.IntN(len(set.Rules))]
		if rule.Effect != authzcasbin.EffectAllow || rule.Resource != authzcasbin.ResourceTool || rule.Condition != "" || strings.ContainsAny(rule.Target, "?[") {
			continue
		}
		tenant := rule.Tenant
		if tenant == "*" {
			tenant = fmt.Sprintf("t%d", r.IntN(10))
		}
		out = append(out, &authzv1.AuthorizeRequest{
			Principal:    &typev1.Principal{Subject: fmt.Sprintf("u%d", r.IntN(500)), Tenant: tenant, Roles: []string{rule.Subject, fmt.Sprintf("role%d", r.IntN(benchRoles))}},
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL,
			Action:       map[string]authzv1.Action{"list": 1, "call": 2, "use": 3}[rule.Action],
			Target:       strings.Replace(rule.Target, "*", "tool1", 1),
		})
	}
	return out
}

// BenchmarkAuthzGRPC: Authorize over loopback gRPC (full interceptor chain)
// from 16 concurrent clients; reports decisions/s and latency percentiles.
// "granted": requests a rule grants (mostly allows; the few denies are
// committed to the decision log before the answer). "random": random roles
// and targets, nearly all denies, so every answer waits for a (group)
// commit of the decision log.
func BenchmarkAuthzGRPC(b *testing.B) {
	set := largePolicy()
	h := startServer(b, set)
	random := make([]*authzv1.AuthorizeRequest, 0, 4096)
	for _, r := range benchRequests(4096) {
		random = append(random, &authzv1.AuthorizeRequest{Principal: &typev1.Principal{Subject: r.Subject, Tenant: r.Tenant, Roles: r.Roles},
			ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Action: authzv1.Action_ACTION_CALL, Target: r.Target})
	}
	granted := grantedRequests(set, 4096)
	for _, w := range []struct {
		name        string
		reqs        []*authzv1.AuthorizeRequest
		parallelism int
	}{{"granted", granted, 8}, {"random", random, 8}, {"granted-serial", granted, 0}} {
		b.Run(w.name, func(b *testing.B) {
			preqs := w.reqs
			var mu sync.Mutex
			var lat []time.Duration
			var allows, total int
			if w.parallelism == 0 {
				// One client, one call at a time: latency without queueing.
				lat = make([]time.Duration, 0, b.N)
				for i := 0; b.Loop(); i++ {
					t0 := time.Now()
					resp, err := h.client.Authorize(context.Background(), preqs[i%len(preqs)])
					lat = append(lat, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
					if resp.GetDecision().GetAllow() {
						allows++
					}
					total++
				}
				slices.Sort(lat)
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "decisions/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(allows)/float64(total), "allow-ratio")
				return
			}
			b.SetParallelism(w.parallelism) // × GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				local := make([]time.Duration, 0, 1024)
				a, n := 0, 0
				i := rand.IntN(len(preqs))
				for pb.Next() {
					t0 := time.Now()
					resp, err := h.client.Authorize(context.Background(), preqs[i%len(preqs)])
					local = append(local, time.Since(t0))
					if err != nil {
						b.Error(err)
						return
					}
					if resp.GetDecision().GetAllow() {
						a++
					}
					n++
					i++
				}
				mu.Lock()
				lat = append(lat, local...)
				allows += a
				total += n
				mu.Unlock()
			})
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "decisions/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(allows)/float64(total), "allow-ratio")
			}
		})
	}
}

// BenchmarkAuthzHandler: the Authorize handler called in-process (no gRPC,
// no interceptors) with a service identity — the service's own cost per
// decision on the granted workload.
func BenchmarkAuthzHandler(b *testing.B) {
	set := largePolicy()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := authz.New(context.Background(), authz.Config{}, svckit.Env{DataDir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Principal: &typev1.Principal{Subject: "runtime", Roles: []string{"admin"}}, Kind: auth.KindService})
	var ps []*authzv1.Policy
	for _, r := range set.Rules {
		p := &authzv1.Policy{Role: r.Subject, Tenant: r.Tenant, Target: r.Target,
			ResourceType: map[string]authzv1.ResourceType{"tool": 1, "skill": 2}[r.Resource],
			Action:       map[string]authzv1.Action{"list": 1, "call": 2, "use": 3}[r.Action],
			Effect:       map[string]authzv1.PolicyEffect{"allow": 1, "deny": 2}[r.Effect]}
		if r.Condition != "" {
			p.Conditions = []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: r.Condition}}}
		}
		ps = append(ps, p)
	}
	var ls []*authzv1.RoleLink
	for _, l := range set.Links {
		ls = append(ls, &authzv1.RoleLink{Member: l.Member, Role: l.Role, Tenant: l.Tenant})
	}
	if _, err := srv.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: ps, RoleLinks: ls}); err != nil {
		b.Fatal(err)
	}
	reqs := grantedRequests(set, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(reqs))
		for pb.Next() {
			if _, err := srv.Authorize(ctx, reqs[i%len(reqs)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
