package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"testing"

	"github.com/gowebpki/jcs"
)

var goldenTools = []HashInput{
	{Name: "fs_read_file", Description: "Read a file <utf-8> & return it — “quoted”", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"number","default":1.50,"maximum":1e21}},"required":["path"],"$schema":"http://json-schema.org/draft-07/schema#"}`)},
	{Name: "echo", Description: "", Parameters: nil},
	{Name: "Zeta-tool", Description: "ünïcode \u2028 line sep", Parameters: json.RawMessage(`{ "type" : "object" , "additionalProperties" : false }`)},
}

// TestCatalogHashGolden pins the hash (docs/architecture.md §8). Changing it is a
// breaking change of the contract: every runtime's stored promotions go stale.
func TestCatalogHashGolden(t *testing.T) {
	got, err := CatalogHash(goldenTools)
	if err != nil {
		t.Fatal(err)
	}
	// Reproduced independently with Python: json.dumps(arr, sort_keys=True,
	// separators=(",", ":"), ensure_ascii=False) over the sorted array, SHA-256.
	const golden = "24d2830ece9e1b3e"
	if got != golden {
		t.Fatalf("hash %s, golden %s", got, golden)
	}
	// Independent reproduction: build the whole array, canonicalise it in one
	// go, hash it.
	sorted := append([]HashInput(nil), goldenTools...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var arr []any
	for _, tl := range sorted {
		p := tl.Parameters
		if p == nil {
			p = json.RawMessage(`{}`)
		}
		arr = append(arr, map[string]any{"name": tl.Name, "schema": map[string]any{"name": tl.Name, "description": tl.Description, "parameters": p}})
	}
	b, _ := json.Marshal(arr)
	canon, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if want := hex.EncodeToString(sum[:])[:16]; want != got {
		t.Fatalf("fast path %s != whole-array JCS %s", got, want)
	}
}

func TestCatalogHashProperties(t *testing.T) {
	base, _ := CatalogHash(goldenTools)
	rev := []HashInput{goldenTools[2], goldenTools[0], goldenTools[1]}
	if h, _ := CatalogHash(rev); h != base {
		t.Fatal("input order changed the hash")
	}
	// Whitespace and key order inside a schema do not matter (canonical form).
	ws := append([]HashInput(nil), goldenTools...)
	ws[2].Parameters = json.RawMessage(`{"additionalProperties":false,"type":"object"}`)
	if h, _ := CatalogHash(ws); h != base {
		t.Fatal("formatting changed the hash")
	}
	for i, mut := range []func(*HashInput){
		func(h *HashInput) { h.Name = "echo2" },
		func(h *HashInput) { h.Description = "x" },
		func(h *HashInput) { h.Parameters = json.RawMessage(`{"type":"object","properties":{}}`) },
	} {
		c := append([]HashInput(nil), goldenTools...)
		mut(&c[1])
		if h, _ := CatalogHash(c); h == base {
			t.Fatalf("mutation %d did not change the hash", i)
		}
	}
	empty, _ := CatalogHash(nil)
	sum := sha256.Sum256([]byte("[]"))
	if empty != hex.EncodeToString(sum[:])[:16] {
		t.Fatal("empty set")
	}
}
