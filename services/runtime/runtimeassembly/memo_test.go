package runtimeassembly

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

type oneAgent struct{ a *runtimev1.Agent }

func (o oneAgent) ThreadAgent(context.Context, *runtimestore.Thread) (*runtimev1.Agent, error) {
	return o.a, nil
}

// memoCatalog is n MCP tools of three servers with schemas (some over the
// schema bound, so truncated), routing keywords on a few, two held for
// review and one of a tenant-scoped server another tenant cannot see.
func memoCatalog(n int) []*catalogv1.Tool {
	var out []*catalogv1.Tool
	for i := 0; i < n; i++ {
		props := map[string]any{"q": map[string]any{"type": "string", "description": "query " + fmt.Sprint(i)}}
		if i%17 == 0 { // over MaxSchemaBytes below
			props["blob"] = map[string]any{"type": "string", "description": strings.Repeat("long text ", 300)}
		}
		if i%5 == 0 {
			props["n"] = map[string]any{"type": "integer", "minimum": 1, "format": "int32"}
		}
		schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": props, "required": []any{"q"}})
		if err != nil {
			panic(err)
		}
		t := &catalogv1.Tool{Name: fmt.Sprintf("srv%d_tool_%03d", i%3, i), Description: fmt.Sprintf("Tool number %d <does> things & more", i),
			Server: fmt.Sprintf("srv%d", i%3), InputSchema: schema, DefinitionHash: fmt.Sprintf("def-%d", i)}
		if i%29 == 0 {
			t.Routing = &catalogv1.Routing{Mode: catalogv1.RoutingMode_ROUTING_MODE_PREFER, Keywords: []string{"weather", "kw" + fmt.Sprint(i)}}
		}
		if i == 7 || i == 8 {
			t.State = catalogv1.ToolState_TOOL_STATE_PENDING
		}
		if i == 9 {
			t.Tenants = []string{"other"}
		}
		out = append(out, t)
	}
	return out
}

// TestMemoisedAssemblyIsByteIdentical assembles the same threads with a
// Builder whose watch streams are live (candidates, deferred sets and bound
// forms shared per catalog generation, docs/decisions/0149) and with one
// whose streams are not (everything built per call, as before): for every
// profile, with promotions, across policy changes and a catalog change, the
// responses are byte for byte the same (deterministic encoding).
func TestMemoisedAssemblyIsByteIdentical(t *testing.T) {
	cat := runtimetest.NewFakeCatalog(memoCatalog(60)...)
	az := runtimetest.NewFakeAuthz()
	az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, "srv1_tool_004")
	sk := runtimetest.NewFakeSkills()
	sk.Put("research", "Research a topic", true, nil, "body")
	addr := runtimetest.ServeAll(t, cat, az, sk)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	store := runtimestore.NewMemory()
	ctx := context.Background()
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t-memo",
		Promoted: &runtimev1.Promoted{Tools: []*runtimev1.PromotedTool{{Name: "srv0_tool_003", DefinitionHash: "def-3"}, {Name: "srv2_tool_017", DefinitionHash: "def-17"}}}}}
	if err := store.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	for _, listMax := range []int{1000, 30} { // names one by one, and the grouped form
		settings := Settings{ToolSearch: true, DeferredListMax: listMax, AutoPromoteTopK: 3, CacheEntries: 16, MaxDescriptionBytes: 4096, MaxSchemaBytes: 2048,
			ExemptServers: []string{"srv2"}}
		deps := Deps{Catalog: catalogv1.NewCatalogServiceClient(conn), Authz: authzv1.NewAuthzServiceClient(conn), Skills: skillsv1.NewSkillsServiceClient(conn),
			Store: store, Agents: oneAgent{&runtimev1.Agent{Name: "default"}}}
		memo, fresh := NewBuilder(settings, deps), NewBuilder(settings, deps)
		wctx, cancel := context.WithCancel(ctx)
		go memo.WatchCatalog(wctx)
		go memo.WatchPolicy(wctx)
		for deadline := time.Now().Add(10 * time.Second); !memo.CacheLive(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("watch streams never live")
			}
		}
		det := proto.MarshalOptions{Deterministic: true}
		// Every profile once at the start (twice: the second from the memo
		// and the cache); later rounds the v0.1.0 form and both native
		// deferral profiles, which bind every deferred tool.
		var all []runtimev1.ToolProfile
		for p := range runtimev1.ToolProfile_name {
			all = append(all, runtimev1.ToolProfile(p))
		}
		few := []runtimev1.ToolProfile{runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES, runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES}
		profiles, reps := all, 2
		compare := func(round string) {
			for _, profile := range profiles {
				for rep := 0; rep < reps; rep++ {
					cur, err := store.GetThread(ctx, "t-memo")
					if err != nil {
						t.Fatal(err)
					}
					got, err := memo.Assemble(ctx, cur, "what is the weather", profile)
					if err != nil {
						t.Fatalf("%s %v: memoised: %v", round, profile, err)
					}
					want, err := fresh.Assemble(ctx, cur, "what is the weather", profile)
					if err != nil {
						t.Fatalf("%s %v: fresh: %v", round, profile, err)
					}
					gb, _ := det.Marshal(got)
					wb, _ := det.Marshal(want)
					if !bytes.Equal(gb, wb) {
						t.Fatalf("list max %d, %s, %v, rep %d: the memoised assembly differs (%d vs %d bytes)", listMax, round, profile, rep, len(gb), len(wb))
					}
					if len(got.GetDeferred()) < 25 || len(got.GetTools()) < 3 {
						t.Fatalf("%s %v: %d deferred, %d tools: the test assembles too little", round, profile, len(got.GetDeferred()), len(got.GetTools()))
					}
				}
			}
		}
		compare("start")
		profiles, reps = few, 1
		memo.watch.mu.Lock()
		cands, views, forms := memo.watch.cands, len(memo.watch.views), memo.watch.forms
		memo.watch.mu.Unlock()
		if cands == nil || views == 0 || forms == nil || len(forms.m) == 0 {
			t.Fatalf("nothing memoised (cands %v, views %d, forms %v): the comparison compares the fresh path with itself", cands != nil, views, forms)
		}
		if fresh.watch.cands != nil || fresh.watch.views != nil || fresh.watch.forms != nil {
			t.Fatal("the builder without watch streams memoised")
		}
		for i := 0; i < 2; i++ {
			az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, fmt.Sprintf("srv0_tool_%03d", 30+3*i))
			time.Sleep(50 * time.Millisecond) // WatchPolicy delivers the version
			compare(fmt.Sprintf("policy change %d", i+1))
		}
		az.Bump() // a policy version that changes nothing visible: the view is reused
		time.Sleep(50 * time.Millisecond)
		compare("policy bump")
		// A catalog change (a new generation) drops the memo with it.
		memo.Invalidate()
		if memo.watch.cands != nil || memo.watch.views != nil || memo.watch.forms != nil {
			t.Fatal("a new catalog generation kept the old generation's memo")
		}
		compare("new generation")
		cancel()
	}
}

// TestDeferredViewSharedAcrossPolicyVersions: two policy versions that
// leave the visible set unchanged share one deferred set (names, map and
// prompt section) instead of building it again.
func TestDeferredViewSharedAcrossPolicyVersions(t *testing.T) {
	cat := runtimetest.NewFakeCatalog(memoCatalog(60)...)
	az := runtimetest.NewFakeAuthz()
	addr := runtimetest.ServeAll(t, cat, az, runtimetest.NewFakeSkills())
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	store := runtimestore.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t-view"}}
	if err := store.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(Settings{ToolSearch: true, DeferredListMax: 1000, CacheEntries: 16}, Deps{Catalog: catalogv1.NewCatalogServiceClient(conn),
		Authz: authzv1.NewAuthzServiceClient(conn), Skills: skillsv1.NewSkillsServiceClient(conn), Store: store, Agents: oneAgent{&runtimev1.Agent{Name: "default"}}})
	go b.WatchCatalog(ctx)
	go b.WatchPolicy(ctx)
	for !b.CacheLive() {
		time.Sleep(10 * time.Millisecond)
	}
	b1, err := b.Build(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	az.Bump()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, pv, _ := b.watch.cacheKey(); pv > b1.PolicyVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("policy version never announced")
		}
	}
	b2, err := b.Build(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if b1 == b2 || b2.PolicyVersion <= b1.PolicyVersion {
		t.Fatalf("the second build is not a rebuild at a newer version (%d, %d)", b1.PolicyVersion, b2.PolicyVersion)
	}
	if len(b1.DeferredNames) == 0 || &b1.DeferredNames[0] != &b2.DeferredNames[0] || b1.DeferredText != b2.DeferredText {
		t.Fatal("the deferred set was built again for an unchanged view")
	}
	for _, n := range b1.DeferredNames {
		if b1.Deferred[n] != b2.Deferred[n] || b1.ByName[n] != b2.ByName[n] {
			t.Fatalf("%s: the candidate Tool was built again for the same catalog generation", n)
		}
	}
	// A policy change that hides a tool gives a different view, built anew.
	az.DenyList(authzv1.ResourceType_RESOURCE_TYPE_TOOL, b1.DeferredNames[0])
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, pv, _ := b.watch.cacheKey(); pv > b2.PolicyVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("policy version never announced")
		}
	}
	b3, err := b.Build(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if len(b3.DeferredNames) != len(b1.DeferredNames)-1 || b3.ViewKey == b1.ViewKey || strings.Contains(b3.DeferredText, b1.DeferredNames[0]+"\n") {
		t.Fatalf("a hidden tool is still in the view: %d names (was %d)", len(b3.DeferredNames), len(b1.DeferredNames))
	}
}
