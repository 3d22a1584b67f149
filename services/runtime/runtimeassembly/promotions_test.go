package runtimeassembly

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

func testBase(hash string, tools ...*Tool) *Base {
	b := &Base{Hash: hash, ByName: map[string]*Tool{}, Deferred: map[string]*Tool{}}
	for _, t := range tools {
		b.ByName[t.Name], b.Deferred[t.Name] = t, t
		b.DeferredNames = append(b.DeferredNames, t.Name)
	}
	return b
}

func thread(p *runtimev1.Promoted) *runtimestore.Thread {
	return &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", Promoted: p}}
}

// TestViewPromotions: bound while the definition hash is unchanged whatever
// the catalog hash; dropped when it changed; absent tools stay promoted.
func TestViewPromotions(t *testing.T) {
	b := testBase("new-hash", &Tool{Name: "a", DefinitionHash: "ha"}, &Tool{Name: "b", DefinitionHash: "hb2"})
	p := &runtimev1.Promoted{CatalogHash: "old-hash", Names: []string{"a", "b", "gone"}, Tools: []*runtimev1.PromotedTool{
		{Name: "a", DefinitionHash: "ha"}, {Name: "b", DefinitionHash: "hb1"}, {Name: "gone", DefinitionHash: "hg"}}}
	v := (&Builder{}).View(context.Background(), thread(p), b)
	if !v.Promoted["a"] || v.Promoted["b"] || len(v.Order) != 1 {
		t.Fatalf("promoted %v", v.Promoted)
	}
	if len(v.Dropped) != 1 || v.Dropped[0].GetName() != "b" || v.Dropped[0].GetPromotedHash() != "hb1" || v.Dropped[0].GetCurrentHash() != "hb2" {
		t.Fatalf("dropped %v", v.Dropped)
	}
	if !v.PromotedUnavailable("gone") || v.Hidden("a") || !v.Hidden("b") {
		t.Fatalf("unavailable %v", v.Unavailable)
	}
}

// TestViewMigratesV010Promotions: a v0.1.0 promotion (names under a
// catalog hash) is migrated with the tool's current definition hash when
// its hash is the assembly's, and dropped otherwise.
func TestViewMigratesV010Promotions(t *testing.T) {
	b := testBase("h", &Tool{Name: "a", DefinitionHash: "ha"}, &Tool{Name: "b", DefinitionHash: "hb"})
	v := (&Builder{}).View(context.Background(), thread(&runtimev1.Promoted{CatalogHash: "h", Names: []string{"a"}}), b)
	if !v.Promoted["a"] || len(v.Migrated) != 1 || v.Migrated[0].GetDefinitionHash() != "ha" || len(v.Dropped) != 0 {
		t.Fatalf("same hash: promoted %v migrated %v dropped %v", v.Promoted, v.Migrated, v.Dropped)
	}
	v = (&Builder{}).View(context.Background(), thread(&runtimev1.Promoted{CatalogHash: "other", Names: []string{"a"}}), b)
	if v.Promoted["a"] || len(v.Migrated) != 0 || len(v.Dropped) != 1 || !strings.Contains(v.Dropped[0].GetReason(), "catalog hash other") {
		t.Fatalf("other hash: promoted %v migrated %v dropped %v", v.Promoted, v.Migrated, v.Dropped)
	}
	v2 := (&Builder{}).View(context.Background(), thread(runtimestore.MergePromoted(&runtimev1.Promoted{CatalogHash: "h", Names: []string{"a"}},
		&runtimev1.Promoted{CatalogHash: "h", Tools: []*runtimev1.PromotedTool{{Name: "a", DefinitionHash: "ha"}}})), testBase("h2", &Tool{Name: "a", DefinitionHash: "ha"}))
	if !v2.Promoted["a"] || len(v2.Dropped) != 0 {
		t.Fatalf("after migration a catalog change must not drop it: %v %v", v2.Promoted, v2.Dropped)
	}
}

func TestBoundTool(t *testing.T) {
	long := strings.Repeat("é", 6000) // 12,000 bytes
	tl := &Tool{Name: "x", Description: long}
	boundTool(tl, 8192, 65536)
	if len(tl.Description) > 8192 || !strings.Contains(tl.Description, "[Description truncated:") || !strings.HasPrefix(tl.Description, "éé") || tl.Truncated == "" {
		t.Fatalf("description: %d bytes, %q", len(tl.Description), tl.Truncated)
	}
	if !strings.Contains(tl.Description, "of 12000 bytes shown") {
		t.Fatalf("notice: %q", tl.Description[len(tl.Description)-60:])
	}
	for i := 0; i < len(tl.Description); {
		r := []rune(tl.Description[i:])[0]
		if r == '\uFFFD' {
			t.Fatal("cut inside a UTF-8 sequence")
		}
		i += len(string(r))
	}
	// A schema over the bound loses nested descriptions first.
	props := map[string]any{}
	for i := 0; i < 50; i++ {
		props[strings.Repeat("p", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))] = map[string]any{"type": "string", "description": strings.Repeat("d", 2000)}
	}
	sch, _ := structpb.NewStruct(map[string]any{"type": "object", "description": "root", "properties": props})
	tl = &Tool{Name: "y", Description: "ok", Params: sch}
	boundTool(tl, 8192, 65536)
	if jsonSize(tl.Params.AsMap()) > 65536 || tl.Params.GetFields()["description"].GetStringValue() != "root" || !strings.Contains(tl.Truncated, "nested descriptions removed") {
		t.Fatalf("schema: %d bytes, %q", jsonSize(tl.Params.AsMap()), tl.Truncated)
	}
	// Still too large without descriptions: replaced, and the description says so.
	enum := make([]any, 20000)
	for i := range enum {
		enum[i] = "value-number"
	}
	sch, _ = structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"enum": enum}}})
	tl = &Tool{Name: "z", Description: "ok", Params: sch}
	boundTool(tl, 8192, 65536)
	if len(tl.Params.GetFields()) != 1 || !strings.Contains(tl.Description, "exceeds the 65536-byte bound") {
		t.Fatalf("replaced schema: %v %q", tl.Params, tl.Description)
	}
	// Within bounds: untouched.
	tl = &Tool{Name: "w", Description: "short"}
	boundTool(tl, 8192, 65536)
	if tl.Description != "short" || tl.Truncated != "" {
		t.Fatal("a small tool was changed")
	}
}
