package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiktoken-go/tokenizer"
	"google.golang.org/protobuf/encoding/protojson"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// bigSuite serves the mcpm registry as one static catalog server, with all
// four services of one process (real authz and skills).
func bigSuite(tb testing.TB) *suite {
	tb.Helper()
	mcpmCatalog := testkit.SharedData(tb, "mcp-catalog/mcpm-registry/tools.jsonl")
	dir := tb.TempDir()
	ext := map[string]any{"mcpServers": map[string]any{"mcpm": map[string]any{"type": "static", "path": mcpmCatalog}}}
	return newSuiteWith(tb, dir, ext, true, nil)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkAssembleTools measures AssembleTools over gRPC loopback (auth
// on, full interceptor chain) against the 2,247-tool catalog: warm (cached
// base assembly) and right after a policy change (full rebuild: catalog
// listing, two FilterResources calls, GetCatalog hash of the deferred set).
// Reports p50/p99 in milliseconds.
func BenchmarkAssembleTools(b *testing.B) {
	s := bigSuite(b)
	alice := s.rt(aliceToken)
	th := newThread(b, alice, nil)
	ctx := context.Background()
	first := assemble(b, alice, th, "")
	if len(first.GetDeferred()) < 2000 {
		b.Fatalf("deferred %d tools, want the whole catalog", len(first.GetDeferred()))
	}
	b.Run("warm", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, UserMessage: "find a tool"}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
	})
	admin := authzv1.NewAuthzServiceClient(s.dial(adminToken))
	lastVersion, stale := first.GetPolicyVersion(), 0
	b.Run("after_policy_change", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			b.StopTimer()
			benchRole++
			if _, err := admin.AddPolicies(ctx, &authzv1.AddPoliciesRequest{Policies: []*authzv1.Policy{{Role: fmt.Sprintf("bench-role-%d", benchRole), Tenant: "*",
				ResourceType: authzv1.ResourceType_RESOURCE_TYPE_TOOL, Target: "x", Action: authzv1.Action_ACTION_LIST, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}}}); err != nil {
				b.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // let WatchPolicy deliver the new version
			b.StartTimer()
			t0 := time.Now()
			r, err := alice.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: th, UserMessage: "find a tool"})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if r.GetPolicyVersion() <= lastVersion {
				stale++
			}
			lastVersion = r.GetPolicyVersion()
		}
		b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(stale), "stale_assemblies")
	})
}

// benchRole makes every benchmark policy line new (a policy change).
var benchRole int

// promptTokens counts the tool-related prompt tokens of a thread's first
// turn (bound schemas in OpenAI format + the deferred-tools section; the
// tool_search schema is among the bound ones) and of binding every tool.
func promptTokens(tb testing.TB) (first, all int, enc string) {
	s := bigSuite(tb)
	alice := s.rt(aliceToken)
	th := newThread(tb, alice, nil)
	r := assemble(tb, alice, th, "")
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		tb.Fatal(err)
	}
	count := func(s string) int {
		n, err := codec.Count(s)
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
	var bound []json.RawMessage
	for _, t := range r.GetTools() {
		j, _ := protojson.Marshal(t.GetOpenai())
		bound = append(bound, j)
	}
	bj, _ := json.Marshal(bound)
	var sections []string
	for _, sec := range r.GetPromptSections() {
		if sec.GetName() == "deferred_tools" {
			sections = append(sections, sec.GetText())
		}
	}
	first = count(string(bj)) + count(strings.Join(sections, "\n"))

	// Every tool bound: the same non-deferred tools plus every catalog tool
	// in OpenAI function format, no deferred section and no tool_search.
	cat := catalogv1.NewCatalogServiceClient(s.dial(adminToken))
	everything := slices.DeleteFunc(slices.Clone(bound), func(j json.RawMessage) bool { return strings.Contains(string(j), `"name":"tool_search"`) })
	token := ""
	for {
		resp, err := cat.ListTools(context.Background(), &catalogv1.ListToolsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			tb.Fatal(err)
		}
		for _, t := range resp.GetTools() {
			params := map[string]any{"type": "object", "properties": map[string]any{}}
			if t.GetInputSchema() != nil {
				params = t.GetInputSchema().AsMap()
			}
			j, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]any{"name": t.GetName(), "description": t.GetDescription(), "parameters": params}})
			everything = append(everything, j)
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	aj, _ := json.Marshal(everything)
	return first, count(string(aj)), "o200k_base"
}

// BenchmarkPromptTokens reports tool-related prompt tokens at a thread's
// first turn against binding all 2,247 tools (o200k_base).
func BenchmarkPromptTokens(b *testing.B) {
	first, all, _ := promptTokens(b)
	for b.Loop() {
	}
	b.ReportMetric(float64(first), "first_turn_tokens")
	b.ReportMetric(float64(all), "all_tools_tokens")
	b.ReportMetric(100*(1-float64(first)/float64(all)), "reduction_pct")
}

// TestPromptTokenReduction checks the goal: at least 97% fewer
// tool-related prompt tokens at the first turn than binding every tool.
func TestPromptTokenReduction(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the 2,247-tool catalog")
	}
	first, all, enc := promptTokens(t)
	red := 100 * (1 - float64(first)/float64(all))
	t.Logf("%s: first turn %d tokens, all tools %d tokens, %.2f%% fewer", enc, first, all, red)
	if red < 97 {
		t.Fatalf("reduction %.2f%% < 97%%", red)
	}
}
