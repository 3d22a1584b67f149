package runtimeschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func js(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("fixture %s: %v", s, err)
	}
	return v
}

func mustBind(t *testing.T, id ID, name, schema string) *Bound {
	t.Helper()
	var in any
	if schema != "" {
		in = js(t, schema)
	}
	b, err := Normalize(id, Tool{Name: name, Description: "Fixture tool.", InputSchema: in})
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if errs := Check(id, b.Render()); len(errs) > 0 {
		t.Fatalf("%s: bound form fails the validator: %v\n%s", id, errs, compact(b.Render()))
	}
	return b
}

func hasKind(b *Bound, k Kind) bool {
	for _, c := range b.Changes {
		if c.Kind == k {
			return true
		}
	}
	return false
}

func params(b *Bound) string { return compact(b.Parameters) }

// Root unions: wrapped into {"input": ...} where the object branches
// cannot be merged; the arguments are unwrapped on the way back. A branch
// that can never be an object is dropped first, so {"input": "go"} is not
// offered (MCP arguments are objects: its unwrapped call would be refused).
func TestRootUnionWrapped(t *testing.T) {
	schema := `{"anyOf": [{"type": "string"}, {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}, {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"]}]}`
	// mcp keeps an all-object root union as it is, with type object added.
	if b := mustBind(t, MCP, "search", schema); hasKind(b, KindRootUnionWrapped) || !hasKind(b, KindRootBranchDropped) ||
		len(b.Parameters["anyOf"].([]any)) != 2 || b.Parameters["type"] != "object" {
		t.Fatalf("mcp: %v %s", b.Changes, params(b))
	}
	for _, id := range []ID{OpenAIChat, OpenAIResponses, AnthropicMessages, Gemini} {
		b := mustBind(t, id, "search", schema)
		if !hasKind(b, KindRootUnionWrapped) || !hasKind(b, KindRootBranchDropped) {
			t.Fatalf("%s: changes %v, want root_branch_dropped and root_union_wrapped", id, b.Changes)
		}
		props := b.Parameters["properties"].(map[string]any)
		if _, ok := props[wrapKey]; !ok || len(props) != 1 {
			t.Fatalf("%s: wrapped root properties = %s", id, compact(props))
		}
		if strings.Contains(compact(props), `"string"}`) && !strings.Contains(compact(props), `"q":{"type":"string"`) {
			t.Fatalf("%s: the string branch is still offered: %s", id, compact(props))
		}
		if !strings.Contains(b.Description, `alternatives {"type":"string"} were left out`) {
			t.Fatalf("%s: the description does not say what was dropped: %q", id, b.Description)
		}
		got, err := b.MapArguments(map[string]any{"input": map[string]any{"q": "go"}})
		if err != nil || !reflect.DeepEqual(got, map[string]any{"q": "go"}) {
			t.Fatalf("%s: MapArguments = %v, %v; want the object unwrapped", id, got, err)
		}
		if err := b.ValidateArguments(map[string]any{"input": "go"}); err == nil {
			t.Fatalf("%s: a string is still valid for the bound schema", id)
		}
		if _, err := b.MapArguments(map[string]any{"input": "go"}); err == nil || !strings.Contains(err.Error(), "arguments.input") {
			t.Fatalf("%s: a non-object inner value: err = %v, want it named", id, err)
		}
		if _, err := b.MapArguments(map[string]any{}); err == nil {
			t.Fatalf("%s: missing input accepted", id)
		}
	}
}

// Branches and roots no object can match: dropped, or the tool left out
// with the reason, in every profile.
func TestRootNonObjectBranches(t *testing.T) {
	for _, id := range []ID{OpenAIChat, OpenAIResponses, AnthropicMessages, Gemini, MCP} {
		// One object branch left: it is the schema, nothing wrapped.
		b := mustBind(t, id, "lookup", `{"anyOf": [{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}, {"type": "string"}, {"$ref": "#/$defs/n"}], "$defs": {"n": {"type": "integer"}}}`)
		if hasKind(b, KindRootUnionWrapped) || !hasKind(b, KindRootBranchDropped) || b.WrapKey() != "" {
			t.Fatalf("%s: changes %v", id, b.Changes)
		}
		if err := b.ValidateArguments(map[string]any{"id": "7"}); err != nil {
			t.Fatalf("%s: the object branch refused: %v (%s)", id, err, params(b))
		}
		if got, err := b.MapArguments(map[string]any{"id": "7"}); err != nil || !reflect.DeepEqual(got, map[string]any{"id": "7"}) {
			t.Fatalf("%s: MapArguments = %v, %v", id, got, err)
		}
		// The one branch left has a type list: narrowed to object.
		b = mustBind(t, id, "listed", `{"oneOf": [{"type": ["object", "null"], "properties": {"a": {"type": "string"}}}, {"type": "null"}]}`)
		if b.WrapKey() != "" || b.Parameters["type"] != "object" || b.ValidateArguments(map[string]any{"a": "x"}) != nil {
			t.Fatalf("%s: %v %s", id, b.Changes, params(b))
		}
		// Object branches that may be objects (no type, a type list) stay.
		b = mustBind(t, id, "loose", `{"oneOf": [{"type": ["object", "null"], "properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}, "minProperties": 1}, {"enum": ["x", "y"]}]}`)
		if !hasKind(b, KindRootBranchDropped) || strings.Contains(params(b), `"x"`) {
			t.Fatalf("%s: enum branch not dropped: %v %s", id, b.Changes, params(b))
		}
		for schema, want := range map[string]string{
			`{"type": "string"}`:                                   `root type "string"`,
			`{"type": ["string", "null"]}`:                         `root type ["string","null"]`,
			`{"anyOf": [{"type": "string"}, {"type": "integer"}]}`: "no branch of the root anyOf can be an object",
			`{"oneOf": [{"const": 1}, {"enum": ["a", null]}]}`:     "no branch of the root oneOf can be an object",
			`{"enum": ["a", "b"]}`:                                 "no value of the root enum is an object",
			`{"const": "x"}`:                                       "root const \"x\" is not an object",
			`{"allOf": [{"$ref": "#/$defs/s"}], "$defs": {"s": {"type": "string"}}}`: "a branch of the root allOf",
		} {
			_, err := Normalize(id, Tool{Name: "t", InputSchema: js(t, schema)})
			var lo *LeftOut
			if !errors.As(err, &lo) || !strings.Contains(lo.Reason, want) || !strings.Contains(lo.Reason, "object") {
				t.Errorf("%s %s: %v, want left out: %s", id, schema, err, want)
			}
		}
	}
	// A branch that accepts anything stays, but the wrapped value is still
	// an object: {"input": "abc"} is not offered.
	for _, id := range []ID{OpenAIChat, OpenAIResponses, AnthropicMessages, Gemini} {
		b := mustBind(t, id, "any", `{"anyOf": [{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "minProperties": 1}, {"description": "anything"}]}`)
		if b.WrapKey() == "" {
			continue
		}
		if id == Gemini { // an object given as its JSON text: "abc" is not one
			if _, err := b.MapArguments(map[string]any{"input": "abc"}); err == nil {
				t.Errorf("%s: a string is taken for a wrapped union: %s", id, params(b))
			}
		} else if b.ValidateArguments(map[string]any{"input": "abc"}) == nil {
			t.Errorf("%s: a string is offered for a wrapped union: %s", id, params(b))
		}
	}
	// A $ref cycle at the root is not followed forever.
	if _, err := Normalize(MCP, Tool{Name: "t", InputSchema: js(t, `{"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}], "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}}`)}); err != nil {
		t.Fatalf("cycle: %v", err)
	}
}

// Object-only unions are merged (or, for mcp, kept with type object added).
func TestRootUnionMerged(t *testing.T) {
	schema := `{"oneOf": [
		{"type": "object", "properties": {"id": {"type": "string"}, "verbose": {"type": "boolean"}}, "required": ["id", "verbose"]},
		{"type": "object", "properties": {"name": {"type": "string"}, "verbose": {"type": "boolean"}}, "required": ["name", "verbose"]}]}`
	b := mustBind(t, AnthropicMessages, "lookup", schema)
	if !hasKind(b, KindRootUnionMerged) || hasKind(b, KindRootUnionWrapped) {
		t.Fatalf("changes %v, want root_union_merged only", b.Changes)
	}
	if got := compact(b.Parameters["required"]); got != `["verbose"]` {
		t.Fatalf("required = %s, want the branches' common [verbose]", got)
	}
	if len(b.Parameters["properties"].(map[string]any)) != 3 {
		t.Fatalf("properties = %s", compact(b.Parameters["properties"]))
	}
	if !strings.Contains(b.Description, "exactly one of: (1) requires id, verbose; (2) requires name, verbose") {
		t.Fatalf("description does not state the alternatives: %q", b.Description)
	}
	got, _ := b.MapArguments(map[string]any{"id": "x", "verbose": true})
	if !reflect.DeepEqual(got, map[string]any{"id": "x", "verbose": true}) {
		t.Fatalf("merged arguments changed: %v", got)
	}
	m := mustBind(t, MCP, "lookup", schema)
	if m.Parameters["type"] != "object" || m.Parameters["oneOf"] == nil || hasKind(m, KindRootUnionWrapped) {
		t.Fatalf("mcp: %s, want the oneOf kept with type object added", params(m))
	}
	// A property the branches define differently blocks the merge.
	conflict := `{"anyOf": [{"type": "object", "properties": {"v": {"type": "string"}}}, {"type": "object", "properties": {"v": {"type": "integer"}}}]}`
	c := mustBind(t, OpenAIChat, "conflict", conflict)
	if !hasKind(c, KindRootUnionWrapped) {
		t.Fatalf("conflicting branches: %v, want wrapped", c.Changes)
	}
	// Constraint-only branches (type object at the root, anyOf of required).
	req := `{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`
	r := mustBind(t, Gemini, "either", req)
	if !hasKind(r, KindRootUnionMerged) || r.Parameters["anyOf"] != nil || r.Parameters["required"] != nil {
		t.Fatalf("gemini constraint-only anyOf: %s %v", params(r), r.Changes)
	}
	if !strings.Contains(r.Description, "one or more of: (1) requires a; (2) requires b") {
		t.Fatalf("description: %q", r.Description)
	}
}

func TestEmptyAndPropertyLess(t *testing.T) {
	for _, tc := range []struct{ name, schema string }{
		{"empty", `{}`}, {"object_only", `{"type": "object"}`}, {"null", ``}, {"true", `true`},
		{"title_only", `{"title": "noArgs", "type": "object", "additionalProperties": false}`},
	} {
		for _, id := range IDs {
			b := mustBind(t, id, "noargs_"+tc.name, tc.schema)
			if id == Gemini {
				if b.Parameters != nil || !hasKind(b, KindParametersOmitted) {
					t.Fatalf("gemini %s: parameters %s, want omitted", tc.name, params(b))
				}
				continue
			}
			if b.Parameters["type"] != "object" || b.Parameters["properties"] == nil {
				t.Fatalf("%s %s: %s, want type object with properties", id, tc.name, params(b))
			}
		}
	}
	b := mustBind(t, OpenAIResponses, "noargs", `{}`)
	if !b.Strict || b.Parameters["additionalProperties"] != false {
		t.Fatalf("openai_responses {}: strict %v %s, want strict with additionalProperties false", b.Strict, params(b))
	}
}

func TestLeftOut(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`false`, "accepts no arguments"},
		{`[1, 2]`, "JSON array, not an object"},
		{`{"type": "object", "properties": [1]}`, "properties: a JSON array"},
		{`"string"`, "JSON string"},
	} {
		for _, id := range IDs {
			_, err := Normalize(id, Tool{Name: "bad", InputSchema: js(t, tc.schema)})
			var lo *LeftOut
			if !errors.As(err, &lo) || !strings.Contains(lo.Reason, tc.want) || lo.Profile != id || lo.Tool != "bad" {
				t.Fatalf("%s %s: err = %v, want a LeftOut saying %q", id, tc.schema, err, tc.want)
			}
		}
	}
	if _, err := Normalize(OpenAIChat, Tool{Name: ""}); err == nil {
		t.Fatal("empty name accepted")
	}
	if _, err := Normalize("nope", Tool{Name: "x"}); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown profile: %v", err)
	}
}

const cyclic = `{"type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}, "alias": {"$ref": "#/properties/tree"}},
  "required": ["tree"],
  "$defs": {"Node": {"type": "object", "description": "A node.", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["name"]}}}`

func TestRefs(t *testing.T) {
	// Gemini has no $ref: inlined, the cycle cut with a described fallback.
	g := mustBind(t, Gemini, "tree", cyclic)
	if strings.Contains(params(g), "$ref") || strings.Contains(params(g), "$defs") {
		t.Fatalf("gemini kept refs: %s", params(g))
	}
	if !hasKind(g, KindRefCycleCut) || !hasKind(g, KindRefInlined) {
		t.Fatalf("gemini changes: %v", g.Changes)
	}
	if !strings.Contains(params(g), "Recursive: a value of the same shape as Node") {
		t.Fatalf("gemini cycle fallback not described: %s", params(g))
	}
	// The cut recursion is an object without properties: carried as JSON text.
	args := map[string]any{"tree": map[string]any{"name": "root", "children": []any{`{"name":"a","children":[{"name":"b"}]}`}}}
	got, err := g.MapArguments(args)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tree": map[string]any{"name": "root", "children": []any{map[string]any{"name": "a", "children": []any{map[string]any{"name": "b"}}}}}}
	if !strings.Contains(params(g), `"children":{"items":{"description":"Recursive: a value of the same shape as Node (not expanded further).\nA JSON object, given as its JSON text.","type":"string"},"type":"array"}`) {
		t.Fatalf("gemini: the recursion is not cut at the first repeat: %s", params(g))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gemini mapped %v, want %v", got, want)
	}
	// OpenAI and Anthropic take $defs: kept; the pointer into properties is inlined.
	for _, id := range []ID{OpenAIChat, AnthropicMessages, OpenAIResponses} {
		b := mustBind(t, id, "tree", cyclic)
		p := params(b)
		if !strings.Contains(p, `"$ref":"#/$defs/Node"`) || strings.Contains(p, "#/properties/tree") {
			t.Fatalf("%s: %s, want $defs refs kept and the pointer ref inlined", id, p)
		}
	}
	// Strict mode reaches into $defs: the optional "children" becomes
	// nullable there, and a null is removed again through the $ref.
	s := mustBind(t, OpenAIResponses, "tree", cyclic)
	if !s.Strict {
		t.Fatalf("openai_responses: not strict: %s", s.StrictFallback)
	}
	got, err = s.MapArguments(map[string]any{"tree": map[string]any{"name": "r", "children": nil}, "alias": nil})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"tree": map[string]any{"name": "r"}}) {
		t.Fatalf("strict mapped %v %v", got, err)
	}
	// mcp passes $defs/$ref and the 2020-12 dialect unchanged.
	mcpIn := `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string", "minLength": 2}}}`
	m := mustBind(t, MCP, "dialect", mcpIn)
	if m.Changed() || params(m) != compact(js(t, mcpIn)) {
		t.Fatalf("mcp changed a valid 2020-12 schema: %s %v", params(m), m.Changes)
	}
	// A root that is only a $ref, and a dangling $ref.
	r := mustBind(t, Gemini, "rootref", `{"$ref": "#/definitions/Args", "definitions": {"Args": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"$ref": "#/definitions/Missing"}}}}}`)
	if !strings.Contains(params(r), `"x":{"type":"integer"}`) || !hasKind(r, KindRefUnresolved) {
		t.Fatalf("root ref: %s %v", params(r), r.Changes)
	}
}

func TestHugeEnum(t *testing.T) {
	var vals []string
	for i := 0; i < 3000; i++ {
		vals = append(vals, fmt.Sprintf(`"value_number_%04d"`, i))
	}
	schema := `{"type": "object", "properties": {"v": {"type": "string", "enum": [` + strings.Join(vals, ",") + `]}}, "required": ["v"]}`
	s := mustBind(t, OpenAIResponses, "enum", schema)
	if s.Strict || !strings.Contains(s.StrictFallback, "enum values") {
		t.Fatalf("3,000 enum values: strict %v (%s), want the documented limit to force strict false", s.Strict, s.StrictFallback)
	}
	for _, id := range []ID{OpenAIChat, AnthropicMessages, Gemini, MCP} {
		b := mustBind(t, id, "enum", schema)
		if len(b.Parameters["properties"].(map[string]any)["v"].(map[string]any)["enum"].([]any)) != 3000 {
			t.Fatalf("%s: enum not kept", id)
		}
	}
	// Non-string enums are strings-only in Gemini: moved into the description.
	g := mustBind(t, Gemini, "ints", `{"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2, 3]}}}`)
	n := g.Parameters["properties"].(map[string]any)["n"].(map[string]any)
	if n["enum"] != nil || !strings.Contains(n["description"].(string), "One of: 1, 2, 3") {
		t.Fatalf("gemini int enum: %s", compact(n))
	}
}

func TestStrictMode(t *testing.T) {
	schema := `{"type": "object", "properties": {"q": {"type": "string", "minLength": 1}, "limit": {"type": "integer"}, "tag": {"$ref": "#/$defs/T"}, "mode": {"enum": ["a", "b"]}},
	  "required": ["q"], "$defs": {"T": {"type": "string"}}}`
	b := mustBind(t, OpenAIResponses, "search", schema)
	if !b.Strict {
		t.Fatalf("not strict: %s", b.StrictFallback)
	}
	p := b.Parameters
	if p["additionalProperties"] != false || compact(p["required"]) != `["limit","mode","q","tag"]` {
		t.Fatalf("strict root: %s", params(b))
	}
	props := p["properties"].(map[string]any)
	if compact(props["limit"].(map[string]any)["type"]) != `["integer","null"]` ||
		compact(props["mode"].(map[string]any)["enum"]) != `["a","b",null]` ||
		compact(props["tag"]) != `{"anyOf":[{"$ref":"#/$defs/T"},{"type":"null"}]}` {
		t.Fatalf("optional properties not nullable: %s", compact(props))
	}
	if q := props["q"].(map[string]any); q["minLength"] != nil || !strings.Contains(q["description"].(string), "minLength: 1") {
		t.Fatalf("minLength not moved into the description: %s", compact(q))
	}
	got, err := b.MapArguments(map[string]any{"q": "go", "limit": nil, "mode": nil, "tag": "x"})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"q": "go", "tag": "x"}) {
		t.Fatalf("MapArguments = %v %v, want the nulls of optional properties removed", got, err)
	}
	// openai_chat binds non-strict and says so.
	c := mustBind(t, OpenAIChat, "search", schema)
	if c.Strict || c.Render()["function"].(map[string]any)["strict"] != false {
		t.Fatal("openai_chat: strict must be sent false")
	}
	// A free-form object cannot be strict.
	f := mustBind(t, OpenAIResponses, "free", `{"type": "object", "properties": {"meta": {"type": "object"}}}`)
	if f.Strict || !strings.Contains(f.StrictFallback, "free-form object at /properties/meta") || !hasKind(f, KindStrictUnavailable) {
		t.Fatalf("free-form: strict %v %q", f.Strict, f.StrictFallback)
	}
	if f.Render()["strict"] != false {
		t.Fatal("fallback must send strict false explicitly")
	}
}

func TestGeminiRules(t *testing.T) {
	schema := `{"type": "object", "properties": {
	  "user-id": {"type": ["string", "null"], "format": "uuid"},
	  "$filter": {"type": "object", "additionalProperties": {"type": "string"}},
	  "n": {"type": "number", "exclusiveMinimum": 0},
	  "kind": {"const": "fixed"},
	  "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
	  "opts": {"type": "object", "properties": {"deep-key": {"type": "boolean"}}, "required": ["deep-key"]},
	  "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
	}, "required": ["user-id", "$filter"], "additionalProperties": false}`
	b := mustBind(t, Gemini, "g", schema)
	props := b.Parameters["properties"].(map[string]any)
	for _, want := range []string{"user_id", "_filter", "n", "kind", "pick", "opts", "pair"} {
		if props[want] == nil {
			t.Fatalf("property %s missing: %s", want, compact(props))
		}
	}
	if compact(b.Parameters["required"]) != `["user_id","_filter"]` {
		t.Fatalf("required not renamed: %s", compact(b.Parameters["required"]))
	}
	uid := props["user_id"].(map[string]any)
	if uid["type"] != "string" || uid["nullable"] != true || uid["format"] != nil {
		t.Fatalf("user_id: %s", compact(uid))
	}
	if k := props["kind"].(map[string]any); compact(k["enum"]) != `["fixed"]` {
		t.Fatalf("const: %s", compact(k))
	}
	if p := props["pick"].(map[string]any); p["anyOf"] == nil || p["oneOf"] != nil {
		t.Fatalf("oneOf: %s", compact(p))
	}
	if f := props["_filter"].(map[string]any); f["type"] != "string" || !strings.Contains(f["description"].(string), "JSON text") {
		t.Fatalf("free-form object: %s", compact(f))
	}
	got, err := b.MapArguments(map[string]any{"user_id": nil, "_filter": `{"a":"b"}`, "opts": map[string]any{"deep_key": true}})
	want := map[string]any{"user-id": nil, "$filter": map[string]any{"a": "b"}, "opts": map[string]any{"deep-key": true}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("MapArguments = %v %v, want %v", got, err, want)
	}
	if _, err := b.MapArguments(map[string]any{"_filter": `[1]`}); err == nil || !strings.Contains(err.Error(), "arguments._filter") {
		t.Fatalf("non-object JSON text: %v", err)
	}
}

func TestNamesAndDescriptions(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 6)
	for _, tc := range []struct {
		id   ID
		name string
	}{{OpenAIChat, "nasa/apod"}, {AnthropicMessages, "chat-with-${AI}"}, {Gemini, "1st.tool"}, {OpenAIResponses, long}, {MCP, "a b"}} {
		b := mustBind(t, tc.id, tc.name, `{"type": "object", "properties": {}}`)
		if b.Name == tc.name || b.Original != tc.name || !hasKind(b, KindNameMapped) {
			t.Fatalf("%s %q: bound %q", tc.id, tc.name, b.Name)
		}
		b2 := mustBind(t, tc.id, tc.name+"x", `{}`)
		if b2.Name == b.Name {
			t.Fatalf("%s: two names map to %q", tc.id, b.Name)
		}
	}
	d := strings.Repeat("é", descriptionMax+10)
	b, err := Normalize(AnthropicMessages, Tool{Name: "d", Description: d, InputSchema: js(t, `{}`)})
	if err != nil || !hasKind(b, KindDescriptionCut) || len([]rune(b.Description)) != descriptionMax {
		t.Fatalf("description: %v %d", err, len([]rune(b.Description)))
	}
}

// The validators fail on what the providers refuse.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		id   ID
		tool string
		want string
	}{
		{AnthropicMessages, `{"name": "a", "input_schema": {"anyOf": [{"type": "object"}]}}`, "type must be \"object\""},
		{AnthropicMessages, `{"name": "a", "input_schema": {"type": "object", "properties": {}, "oneOf": [{}]}}`, "oneOf is not allowed at the top level"},
		{AnthropicMessages, `{"name": "a/b", "input_schema": {"type": "object", "properties": {}}}`, "does not match"},
		{OpenAIChat, `{"type": "function", "function": {"name": "a", "strict": false, "parameters": {"type": "object", "properties": {"l": {"type": "array"}}}}}`, "array schema missing items"},
		{OpenAIChat, `{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}}`, "strict: must be sent"},
		{OpenAIResponses, `{"type": "function", "name": "a", "strict": true, "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}`, "additionalProperties must be false"},
		{OpenAIResponses, `{"type": "function", "name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "properties": {"x": {"type": "string"}}}}`, "every property must be required"},
		{OpenAIResponses, `{"type": "function", "name": "a", "strict": true, "parameters": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {}}}}`, "every schema needs a type"},
		{Gemini, `{"name": "a", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": "string"}}}}`, "$ref is not supported"},
		{Gemini, `{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}}`, "single type name"},
		{Gemini, `{"name": "a", "parameters": {"type": "object", "properties": {"x-y": {"type": "string"}}}}`, "property name"},
		{Gemini, `{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "object"}}}}`, "non-empty for OBJECT"},
		{Gemini, `{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer", "enum": [1]}}}}`, "enum values must be strings"},
		{MCP, `{"name": "a", "inputSchema": {"anyOf": [{"type": "object"}]}}`, "type must be \"object\""},
		{MCP, `{"name": "a", "inputSchema": {"type": "object"}}`, "properties must be present"},
		{MCP, `{"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}}`, "does not resolve"},
	} {
		errs := Check(tc.id, js(t, tc.tool).(map[string]any))
		if !strings.Contains(strings.Join(errs, "; "), tc.want) {
			t.Errorf("%s %s: violations %v, want %q", tc.id, tc.tool, errs, tc.want)
		}
	}
}
