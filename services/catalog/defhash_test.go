package catalog

import (
	"encoding/json"
	"testing"
)

// TestDefinitionCanonGolden pins the canonical form and hash of one tool
// definition (docs/architecture.md §8): keys in RFC 8785 order, absent
// schema = {}, absent output schema and annotations = null, numbers and
// strings canonicalised.
func TestDefinitionCanonGolden(t *testing.T) {
	in := DefinitionInput{Name: "fs_read", Title: "Read", Description: "Read a file \u00e9",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":1e3}}}`),
		Annotations: json.RawMessage(`{"readOnlyHint": true}`)}
	c, err := DefinitionCanon(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"annotations":{"readOnlyHint":true},"description":"Read a file é","inputSchema":{"properties":{"path":{"maxLength":1000,"type":"string"}},"type":"object"},"name":"fs_read","outputSchema":null,"title":"Read"}`
	if string(c) != want {
		t.Fatalf("canon =\n%s\nwant\n%s", c, want)
	}
	if h := DefinitionHash(c); len(h) != 64 || h != DefinitionHash([]byte(want)) {
		t.Fatalf("hash %s", h)
	}
	// Every covered field changes the hash; whitespace and key order do not.
	base := DefinitionHash(c)
	same := in
	same.InputSchema = json.RawMessage(` { "properties" : {"path":{"maxLength":1000,"type":"string"}}, "type":"object" } `)
	if c2, _ := DefinitionCanon(same); DefinitionHash(c2) != base {
		t.Error("formatting changed the hash")
	}
	for name, mut := range map[string]func(*DefinitionInput){
		"name":         func(d *DefinitionInput) { d.Name = "fs_read2" },
		"title":        func(d *DefinitionInput) { d.Title = "" },
		"description":  func(d *DefinitionInput) { d.Description += "!" },
		"inputSchema":  func(d *DefinitionInput) { d.InputSchema = json.RawMessage(`{"type":"object"}`) },
		"outputSchema": func(d *DefinitionInput) { d.OutputSchema = json.RawMessage(`{"type":"object"}`) },
		"readOnlyHint": func(d *DefinitionInput) { d.Annotations = json.RawMessage(`{"readOnlyHint": false}`) },
	} {
		d := in
		mut(&d)
		c2, err := DefinitionCanon(d)
		if err != nil {
			t.Fatal(err)
		}
		if DefinitionHash(c2) == base {
			t.Errorf("changing %s did not change the hash", name)
		}
	}
}

func TestDiffDefinitions(t *testing.T) {
	a, _ := DefinitionCanon(DefinitionInput{Name: "t", Description: "old", InputSchema: json.RawMessage(`{"type":"object","properties":{"a/b":{"type":"string"}}}`)})
	b, _ := DefinitionCanon(DefinitionInput{Name: "t", Description: "new", InputSchema: json.RawMessage(`{"type":"object","properties":{"c":{"type":"integer","maximum":12345678901234567890}}}`)})
	got := diffDefinitions(a, b)
	want := []string{"/description", "/inputSchema/properties/a~1b", "/inputSchema/properties/c"}
	if len(got) != len(want) {
		t.Fatalf("diff = %+v", got)
	}
	for i, c := range got {
		if c.Path != want[i] {
			t.Errorf("change %d path %s; want %s", i, c.Path, want[i])
		}
	}
	// RFC 8785 serialises numbers as IEEE doubles (the canonical form).
	if got[1].hasNew || !got[1].hasOld || got[2].hasOld || string(got[2].New) != `{"maximum":12345678901234567000,"type":"integer"}` {
		t.Errorf("added/removed members: %+v", got[1:])
	}
	if back := changesFromJSON(changesJSON(got)); len(back) != 3 || back[0].Path != "/description" || !back[2].hasNew || back[2].hasOld {
		t.Errorf("audit JSON round trip: %+v", back)
	}
	if n := len(diffDefinitions(nil, b)); n != 6 {
		t.Errorf("a new tool's diff lists %d members; want all 6", n)
	}
}
