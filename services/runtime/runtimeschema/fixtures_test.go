package runtimeschema

import (
	"fmt"
	"strings"
	"testing"
)

// awkward are fixtures of every awkward shape seen in the wild.
func awkward(t *testing.T) []Tool {
	var enum []string
	for i := 0; i < 5000; i++ {
		enum = append(enum, fmt.Sprintf(`"v%05d"`, i))
	}
	fx := map[string]string{
		"root_anyof_mixed":    `{"anyOf": [{"type": "string"}, {"type": "object", "properties": {"q": {"type": "string"}}}]}`,
		"root_oneof_objects":  `{"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}`,
		"root_allof":          `{"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}`,
		"root_allof_refs":     `{"allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "$defs": {"A": {"type": "object", "properties": {"a": {"type": "string"}}}, "B": {"type": "object", "properties": {"b": {"type": "string"}}}}}`,
		"root_type_list":      `{"type": ["object", "null"], "properties": {"x": {"type": "string"}}}`,
		"root_string":         `{"type": "string", "enum": ["a", "b"]}`,
		"root_not_if":         `{"type": "object", "properties": {"a": {"type": "string"}}, "not": {"required": ["b"]}, "if": {"required": ["a"]}, "then": {"required": ["c"]}}`,
		"root_enum_objects":   `{"enum": [{"a": 1}, {"b": 2}]}`,
		"empty":               `{}`,
		"null":                `null`,
		"true":                `true`,
		"object_no_props":     `{"type": "object"}`,
		"props_only":          `{"properties": {"x": {"type": "string"}}}`,
		"ref_cycle":           cyclic,
		"ref_self_root":       `{"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}}`,
		"ref_mutual":          `{"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}, "definitions": {"A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}}}, "B": {"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}}}}`,
		"ref_external":        `{"type": "object", "properties": {"a": {"$ref": "https://example.com/schema.json"}}}`,
		"ref_alias_chain":     `{"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"$ref": "#/$defs/Y"}, "Y": {"$ref": "#/$defs/X"}}}`,
		"huge_enum":           `{"type": "object", "properties": {"v": {"type": "string", "enum": [` + strings.Join(enum, ",") + `]}}}`,
		"nested_free_objects": `{"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": true}, "list": {"type": "array", "items": {"type": "object"}}}}`,
		"array_no_items":      `{"type": "object", "properties": {"l": {"type": "array"}, "t": {"type": ["array", "string"]}}}`,
		"tuple":               `{"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]}}}`,
		"bool_props":          `{"type": "object", "properties": {"any": true, "never": false}}`,
		"bad_required":        `{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost", 3]}`,
		"weird_type":          `{"type": "object", "properties": {"k": {"type": {"1": "ONE"}}, "e": {"type": "string", "enum": []}}}`,
		"nullable_anyof":      `{"type": "object", "properties": {"n": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}}}`,
		"deep":                deepSchema(14),
		"dashed_names":        `{"type": "object", "properties": {"x-api-key": {"type": "string"}, "x_api_key": {"type": "string"}, "9lives": {"type": "integer"}}}`,
		"pattern_props":       `{"type": "object", "properties": {"m": {"type": "object", "patternProperties": {"^s_": {"type": "string"}}}}}`,
		"const_and_formats":   `{"type": "object", "properties": {"c": {"const": 3}, "u": {"type": "string", "format": "uri"}, "d": {"type": "string", "format": "date-time"}}}`,
		"draft4_exclusive":    `{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}`,
		"openapi_nullable":    `{"type": "object", "properties": {"s": {"type": "string", "nullable": true}}}`,
		"strict_ready":        `{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}`,
		"many_properties":     manyProps(6000),
		"root_ref_to_pointer": `{"$ref": "#/properties/x", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}}`,
		"anyof_ref_branches":  `{"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "$defs": {"A": {"type": "object", "properties": {"a": {"type": "string"}}}, "B": {"type": "string"}}}`,
	}
	var out []Tool
	for _, name := range sortedKeys(fx) {
		var in any
		if fx[name] != "null" {
			in = js(t, fx[name])
		}
		out = append(out, Tool{Name: name, Description: "Fixture " + name + ".", InputSchema: in})
	}
	return out
}

func deepSchema(depth int) string {
	s := `{"type": "string"}`
	for i := 0; i < depth; i++ {
		s = fmt.Sprintf(`{"type": "object", "properties": {"l%d": %s}}`, i, s)
	}
	return s
}

func manyProps(n int) string {
	var ps []string
	for i := 0; i < n; i++ {
		ps = append(ps, fmt.Sprintf(`"p%d": {"type": "string"}`, i))
	}
	return `{"type": "object", "properties": {` + strings.Join(ps, ",") + `}}`
}

// TestAwkwardFixtures: every awkward shape is bound for every profile and
// passes that profile's validator; none is left out.
func TestAwkwardFixtures(t *testing.T) {
	tools := awkward(t)
	counts := bindAll(t, tools)
	report(t, fmt.Sprintf("awkward fixtures, %d tools", len(tools)), counts)
	// root_string is the one left out: MCP arguments are objects, so no
	// call of it could ever match (docs/decisions/0096-only-object-branches-at-the-root.md).
	for _, id := range IDs {
		if c := counts[id]; c.leftOut != 1 || c.invalid != 0 {
			t.Errorf("%s: %d left out, %d invalid", id, c.leftOut, c.invalid)
		}
		for _, tool := range tools {
			if _, err := Normalize(id, tool); (err != nil) != (tool.Name == "root_string") {
				t.Errorf("%s %s: %v", id, tool.Name, err)
			}
		}
	}
	// The limits of strict mode are met by falling back, not by failing.
	for _, name := range []string{"deep", "many_properties", "huge_enum", "ref_external"} {
		for _, tool := range tools {
			if tool.Name != name {
				continue
			}
			b, err := Normalize(OpenAIResponses, tool)
			if err != nil {
				t.Fatal(err)
			}
			if name != "ref_external" && b.Strict {
				t.Errorf("%s: bound strict beyond the documented limits", name)
			}
		}
	}
}
