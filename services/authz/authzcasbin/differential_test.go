package authzcasbin

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	diffRoles    = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12"}
	diffUsers    = []string{"u0", "u1", "u2"}
	diffTenants  = []string{"t0", "t1", "t2"}
	diffNames    = []string{"n0_a", "n0_b", "n1_a", "n1_b", "n2_c", "web_search", "a/b", "n0_a/x", "Web_Search", "N0_A", "n0_A"}
	diffPatterns = []string{"n0_a", "n0_b", "n1_a", "n2_c", "web_search", "n0_*", "n1_*", "*", "**", "n?_a", "{n0,n1}_b", "a/*", "web_*", "[nw]*", `n0\_a`, "(?i)web_*", "(?i)N0_a", "(?i)[N]?_*"}
	diffConds    = []string{"", "", "", "!subagent", "attr.team == 'infra'", "input.path under '/data'", "input.cmd matches 'rm'", "agent == 'p' && !subagent", "annotation.readOnlyHint == 'true'", "server == 's1'", "server in ['s1', 's2'] && annotation.destructiveHint != 'true'", "annotation.title glob 'Read*'"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randomSet(r *rand.Rand, version int64) PolicySet {
	set := PolicySet{Version: version}
	nRules := 1 + r.IntN(60)
	for i := 0; i < nRules; i++ {
		sub := pick(r, diffRoles)
		if r.IntN(8) == 0 {
			sub = UserPrefix + pick(r, diffUsers)
		}
		tenant := Wildcard
		if r.IntN(2) == 0 {
			tenant = pick(r, diffTenants)
		}
		res := Wildcard
		if r.IntN(3) > 0 {
			res = pick(r, ResourceTypes)
		}
		act := Wildcard
		if r.IntN(3) > 0 {
			act = pick(r, Actions)
		}
		eft := EffectAllow
		if r.IntN(5) == 0 {
			eft = EffectDeny
		}
		set.Rules = append(set.Rules, Rule{Subject: sub, Tenant: tenant, Resource: res, Target: pick(r, diffPatterns), Action: act, Effect: eft, Condition: pick(r, diffConds)})
	}
	nLinks := r.IntN(15)
	for i := 0; i < nLinks; i++ {
		m := pick(r, diffRoles)
		if r.IntN(6) == 0 {
			m = UserPrefix + pick(r, diffUsers)
		}
		role := pick(r, diffRoles)
		if role == m {
			continue
		}
		tenant := Wildcard
		if r.IntN(2) == 0 {
			tenant = pick(r, diffTenants)
		}
		set.Links = append(set.Links, Link{Member: m, Role: role, Tenant: tenant})
	}
	if r.IntN(4) == 0 { // a long chain, beyond Casbin's 10-hop limit
		for i := 0; i+1 < len(diffRoles); i++ {
			set.Links = append(set.Links, Link{Member: diffRoles[i], Role: diffRoles[i+1], Tenant: Wildcard})
		}
	}
	return set
}

func randomRequest(r *rand.Rand) Request {
	req := Request{Tenant: pick(r, diffTenants), Resource: pick(r, ResourceTypes), Action: pick(r, Actions), Target: pick(r, diffNames)}
	for n := r.IntN(3); n >= 0; n-- {
		req.Roles = append(req.Roles, pick(r, diffRoles))
	}
	if r.IntN(2) == 0 {
		req.Subject = pick(r, diffUsers)
	}
	req.Cond.IsSubagent = r.IntN(3) == 0
	req.Cond.Agent = pick(r, []string{"", "p", "q"})
	req.Cond.Attributes = map[string]string{"team": pick(r, []string{"infra", "web", ""})}
	if r.IntN(3) > 0 { // resource attributes as the authz server resolves them
		req.Cond.Server = pick(r, []string{"", "s1", "s2", "s3"})
		raw := map[string]any{}
		for _, h := range Hints {
			switch r.IntN(4) {
			case 0:
				raw[h] = true
			case 1:
				raw[h] = false
			case 2:
				raw[h] = "true" // not a boolean: takes the default
			}
		}
		if r.IntN(2) == 0 {
			raw["title"] = pick(r, []string{"Read file", "Write file"})
		}
		req.Cond.Annotations = ResolveAnnotations(raw, map[string]bool{HintReadOnly: r.IntN(4) == 0})
	}
	if r.IntN(3) > 0 {
		req.Cond.CallTime = true
		req.Cond.Input = map[string]any{}
		if r.IntN(3) > 0 {
			req.Cond.Input["path"] = pick(r, []string{"/data/x", "/etc/x", "/data/../etc", "rel"})
		}
		if r.IntN(3) > 0 {
			req.Cond.Input["cmd"] = pick(r, []string{"ls", "rm -rf /", "echo rm"})
		}
	}
	return req
}

// TestDifferentialIndexVsCasbin: the indexed path and plain Casbin Enforce
// agree (allow, reason code and deciding rule) on random policies and requests.
func TestDifferentialIndexVsCasbin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	policies, perPolicy := 150, 150
	if testing.Short() || raceEnabled {
		policies, perPolicy = 15, 60
	}
	var decisions, allows int
	for p := 0; p < policies; p++ {
		set := randomSet(r, int64(p+1))
		e, _ := NewEngine("")
		if err := e.Load(set); err != nil {
			t.Fatalf("policy %d: %v", p, err)
		}
		// Casbin over ALL subjects (including ones no line mentions, which the
		// engine drops before deciding): the dropped subjects must be inert.
		raw, err := newCasbinDecider(DefaultModel, set, false)
		if err != nil {
			t.Fatal(err)
		}
		for q := 0; q < perPolicy; q++ {
			req := randomRequest(r)
			for round := 0; round < 2; round++ { // round 2 exercises the cache
				got, want := e.Decide(&req), e.DecideOracle(&req)
				if round == 0 {
					if u := e.DecideUncached(&req); u.Allow != want.Allow || u.PolicyID != want.PolicyID || u.Code() != want.Code() {
						t.Fatalf("uncached index disagrees: %+v vs %+v", u, want)
					}
					if tenant, all, err := req.normalize(); err == nil && want.Code() != CodeUnknownRole {
						if r := raw.decide(tenant, all, &req, set.Version); r.Allow != want.Allow || r.PolicyID != want.PolicyID || r.Code() != want.Code() {
							t.Fatalf("Casbin over all subjects %v: %+v, engine %+v", all, r, want)
						}
					}
				}
				if got.Allow != want.Allow || got.Code() != want.Code() || got.PolicyID != want.PolicyID || got.PolicyVersion != want.PolicyVersion {
					t.Fatalf("policy %d request %+v\nindex:  %+v\noracle: %+v\npolicy:\n%s", p, req, got, want, dumpSet(set))
				}
			}
			decisions++
			if want := e.DecideOracle(&req); want.Allow {
				allows++
			}
		}
		// DecideAll (FilterResources) answers like Decide, on one snapshot.
		req := randomRequest(r)
		all, v := e.DecideAll(&req, diffNames)
		for i, name := range diffNames {
			one := req
			one.Target = name
			if want := e.DecideOracle(&one); all[i].Allow != want.Allow || all[i].PolicyID != want.PolicyID || all[i].Code() != want.Code() || v != want.PolicyVersion {
				t.Fatalf("DecideAll %s: %+v, oracle %+v", name, all[i], want)
			}
		}
	}
	if allows == 0 || allows == decisions {
		t.Fatalf("degenerate random cases: %d allows of %d", allows, decisions)
	}
	t.Logf("%d decisions compared, %d allows", decisions, allows)
}

func dumpSet(s PolicySet) string {
	out := ""
	for _, r := range s.Rules {
		out += r.String() + "\n"
	}
	for _, l := range s.Links {
		out += l.String() + "\n"
	}
	return out
}

// TestConcurrentReload: 8 goroutines decide while the policy is replaced 100
// times; every decision matches exactly the policy version it reports.
func TestConcurrentReload(t *testing.T) {
	e, _ := NewEngine("")
	// Version v allows tool "t<v%5>" for role r and denies "t<(v+1)%5>"
	// explicitly; everything else is no_policy.
	setFor := func(v int64) PolicySet {
		return PolicySet{Version: v, Rules: []Rule{
			{Subject: "r", Tenant: Wildcard, Resource: ResourceTool, Target: fmt.Sprintf("t%d", v%5), Action: Wildcard, Effect: EffectAllow},
			{Subject: "r", Tenant: Wildcard, Resource: ResourceTool, Target: fmt.Sprintf("t%d", (v+1)%5), Action: Wildcard, Effect: EffectDeny},
			{Subject: "r", Tenant: Wildcard, Resource: ResourceTool, Target: "t*", Action: ActionList, Effect: EffectAllow},
		}}
	}
	if err := e.Load(setFor(1)); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var checked atomic.Int64
	versions := make([]map[int64]bool, 8)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		versions[g] = map[int64]bool{}
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			i := 0
			for !stop.Load() {
				i++
				target := fmt.Sprintf("t%d", i%5)
				d := e.Decide(&Request{Roles: []string{"r"}, Resource: ResourceTool, Action: ActionCall, Target: target})
				v := d.PolicyVersion
				versions[g][v] = true
				var wantAllow bool
				var wantCode string
				switch target {
				case fmt.Sprintf("t%d", v%5):
					wantAllow, wantCode = true, CodeAllowed
				case fmt.Sprintf("t%d", (v+1)%5):
					wantCode = CodeDenied
				default:
					wantCode = CodeNoPolicy
				}
				if d.Allow != wantAllow || d.Code() != wantCode {
					errs <- fmt.Errorf("goroutine %d: %s at version %d: %+v", g, target, v, d)
					return
				}
				checked.Add(1)
			}
		}(g)
	}
	for v := int64(2); v <= 101; v++ {
		if err := e.Load(setFor(v)); err != nil {
			t.Fatal(err)
		}
		for n := checked.Load(); checked.Load() < n+20 && len(errs) == 0; {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, m := range versions {
		for v := range m {
			seen[v] = true
		}
	}
	if len(seen) < 50 {
		t.Fatalf("decisions saw only %d distinct versions", len(seen))
	}
	t.Logf("%d decisions over %d versions", checked.Load(), len(seen))
}
