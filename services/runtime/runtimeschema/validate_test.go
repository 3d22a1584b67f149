package runtimeschema

import (
	"strings"
	"testing"
)

// TestValidateArguments: arguments are checked against the bound form the
// model saw (strict nullables, $defs kept, wrapped unions), the failure
// names the most specific JSON pointer, and schemas that cannot be compiled
// (an external $ref, never loaded) are not checked.
func TestValidateArguments(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"id":   map[string]any{"type": "string"},
		"tags": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/tag"}},
		"mode": map[string]any{"enum": []any{"fast", "slow"}},
	}, "required": []any{"id"}, "$defs": map[string]any{"tag": map[string]any{"type": "object", "properties": map[string]any{"k": map[string]any{"type": "integer"}}, "required": []any{"k"}}}}
	union := map[string]any{"anyOf": []any{map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}}, map[string]any{"type": "string"}}}
	for _, c := range []struct {
		name    string
		profile ID
		schema  any
		args    map[string]any
		want    string // "" = valid
	}{
		{"valid", OpenAIChat, schema, map[string]any{"id": "a", "tags": []any{map[string]any{"k": 1.0}}}, ""},
		{"missing required", AnthropicMessages, schema, map[string]any{}, "at /: missing property 'id'"},
		{"wrong type deep, through $ref", AnthropicMessages, schema, map[string]any{"id": "a", "tags": []any{map[string]any{"k": "x"}}}, "at /tags/0/k: got string, want integer"},
		{"enum", OpenAIChat, schema, map[string]any{"id": "a", "mode": "medium"}, "at /mode: value must be one of"},
		// Strict mode made the optional properties required and nullable:
		// null is what the model sends for "absent".
		{"strict nullable", OpenAIResponses, schema, map[string]any{"id": "a", "tags": nil, "mode": nil}, ""},
		{"strict requires every property", OpenAIResponses, schema, map[string]any{"id": "a"}, "missing properties"},
		// The string branch can never be MCP arguments: dropped, the object
		// branch left is the root.
		{"union, object branch", AnthropicMessages, union, map[string]any{"id": "a"}, ""},
		{"union, the string branch is not offered", AnthropicMessages, union, map[string]any{"input": "plain"}, "at /: missing property 'id'"},
		{"union, bad branch", AnthropicMessages, union, map[string]any{"id": 3.0}, "at /id: got number, want string"},
		{"external $ref is not loaded", OpenAIChat, map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "https://example.com/x.json"}}}, map[string]any{"x": 1.0}, ""},
	} {
		b, err := Normalize(c.profile, Tool{Name: "t", InputSchema: c.schema})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = b.ValidateArguments(c.args)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if err := ValidateOwnArguments(Tool{Name: "t", InputSchema: union}, map[string]any{"id": "a"}); err != nil {
		t.Errorf("own shape of the union: %v", err)
	}
	if err := ValidateOwnArguments(Tool{Name: "t", InputSchema: nil}, map[string]any{"anything": 1.0}); err != nil {
		t.Errorf("absent schema: %v", err)
	}
}
