package runtimeassembly

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
)

func params(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(js), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBindForms(t *testing.T) {
	union := &Tool{Name: "nasa/apod", Description: "Picture of the day.", Source: SourceMCP,
		Params: params(t, `{"anyOf": [{"type": "string"}, {"type": "object", "properties": {"date": {"type": "string"}}}]}`)}
	before, _ := protojson.Marshal(union.Params)
	// UNSPECIFIED: the v0.1.0 forms, normalised, no bound.
	ts, err := Bind(union, runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED)
	if err != nil {
		t.Fatal(err)
	}
	if ts.GetBound() != nil || ts.GetName() != "nasa/apod" {
		t.Fatalf("unspecified: bound %v name %q", ts.GetBound(), ts.GetName())
	}
	for id, form := range map[runtimeschema.ID]*structpb.Struct{runtimeschema.OpenAIChat: ts.GetOpenai(), runtimeschema.AnthropicMessages: ts.GetAnthropic()} {
		if errs := runtimeschema.Check(id, form.AsMap()); len(errs) > 0 {
			t.Fatalf("%s form invalid: %v", id, errs)
		}
	}
	fn := ts.GetOpenai().GetFields()["function"].GetStructValue().GetFields()
	if fn["parameters"].GetStructValue().GetFields()["type"].GetStringValue() != "object" || !strings.HasPrefix(fn["name"].GetStringValue(), "nasa_apod_") {
		t.Fatalf("openai form: %v", fn)
	}
	if ts.GetAnthropic().GetFields()["name"].GetStringValue() != fn["name"].GetStringValue() {
		t.Fatal("the openai and anthropic forms bind different names")
	}
	// A profile fills bound in that profile's form.
	for p, id := range map[runtimev1.ToolProfile]runtimeschema.ID{
		runtimev1.ToolProfile_TOOL_PROFILE_GEMINI: runtimeschema.Gemini, runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES: runtimeschema.OpenAIResponses,
		runtimev1.ToolProfile_TOOL_PROFILE_MCP: runtimeschema.MCP, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES: runtimeschema.AnthropicMessages} {
		ts, err := Bind(union, p)
		if err != nil {
			t.Fatal(err)
		}
		if errs := runtimeschema.Check(id, ts.GetBound().AsMap()); len(errs) > 0 {
			t.Fatalf("%s bound invalid: %v", id, errs)
		}
	}
	after, _ := protojson.Marshal(union.Params)
	if string(before) != string(after) {
		t.Fatal("Bind changed the catalog's schema")
	}
	// A tool that cannot be made valid is an error naming the reason.
	_, err = Bind(&Tool{Name: "never", Params: params(t, `{"type": "object", "properties": [1]}`)}, runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED)
	var lo *runtimeschema.LeftOut
	if !errors.As(err, &lo) || !strings.Contains(lo.Reason, "properties") {
		t.Fatalf("left out: %v", err)
	}
	if _, err := Bind(union, runtimev1.ToolProfile(42)); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

// TestBindLeavesOutWhatTheValidatorRejects: the schemas a strict provider
// rejects (empty combinators, root $ref cycles, a root $ref to a
// non-object, an unresolvable root $ref) are left out with the reason in
// every profile and shown as left out by tool_search; they are never sent
// to the provider (docs/decisions/0096-only-object-branches-at-the-root.md,
// addendum). BindTool also runs runtimeschema.Check on every bound form, as
// a second line behind the normaliser.
func TestBindLeavesOutWhatTheValidatorRejects(t *testing.T) {
	cases := map[string]string{
		`{"type":"object","properties":{"x":{"anyOf":[]}}}`: "/properties/x: anyOf is an empty list",
		`{"type":"object","properties":{"x":{"oneOf":[]}}}`: "/properties/x: oneOf is an empty list",
		`{"type":"object","properties":{"x":{"allOf":[]}}}`: "/properties/x: allOf is an empty list",
		`{"anyOf": []}`: "root anyOf is an empty list",
		`{"oneOf": []}`: "root oneOf is an empty list",
		`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`:                          "is a cycle",
		`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`: "is a cycle",
		`{"$ref":"#/$defs/s","$defs":{"s":{"type":"string"}}}`:                             `is {"type":"string"}`,
		`{"$ref":"#/$defs/missing"}`:                                                       "does not resolve",
	}
	for js, want := range cases {
		for p := range runtimev1.ToolProfile_name {
			tool := &Tool{Name: "bad", Source: SourceMCP, Params: params(t, js)}
			ts, err := Bind(tool, runtimev1.ToolProfile(p))
			var lo *runtimeschema.LeftOut
			if !errors.As(err, &lo) {
				b, _ := protojson.Marshal(ts)
				t.Fatalf("%s profile %v: bound (%s), want left out", js, runtimev1.ToolProfile(p), b)
			}
			if !strings.Contains(lo.Reason, want) {
				t.Fatalf("%s profile %v: reason %q, want it to say %q", js, runtimev1.ToolProfile(p), lo.Reason, want)
			}
			if m := SearchForm(tool, runtimev1.ToolProfile(p)); m["left_out"] == nil {
				t.Fatalf("%s profile %v: tool_search shows it as callable: %v", js, runtimev1.ToolProfile(p), m)
			}
		}
	}
	// A root $ref to an object is inlined and valid in every profile, strict
	// openai_responses included (additionalProperties false at the root).
	ok := &Tool{Name: "good", Source: SourceMCP, Params: params(t, `{"$ref":"#/$defs/o","$defs":{"o":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`)}
	for p, id := range map[runtimev1.ToolProfile]runtimeschema.ID{
		runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT: runtimeschema.OpenAIChat, runtimev1.ToolProfile_TOOL_PROFILE_GEMINI: runtimeschema.Gemini,
		runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES: runtimeschema.OpenAIResponses,
		runtimev1.ToolProfile_TOOL_PROFILE_MCP:              runtimeschema.MCP, runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES: runtimeschema.AnthropicMessages} {
		ts, err := Bind(ok, p)
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		bound := ts.GetBound().AsMap()
		if errs := runtimeschema.Check(id, bound); len(errs) > 0 {
			t.Fatalf("%v: %v", p, errs)
		}
		key := map[runtimeschema.ID]string{runtimeschema.MCP: "inputSchema", runtimeschema.AnthropicMessages: "input_schema"}[id]
		var root map[string]any
		if id == runtimeschema.OpenAIChat {
			root = bound["function"].(map[string]any)["parameters"].(map[string]any)
		} else if key != "" {
			root = bound[key].(map[string]any)
		} else {
			root = bound["parameters"].(map[string]any)
		}
		if root["$ref"] != nil || root["type"] != "object" || root["properties"].(map[string]any)["q"] == nil {
			t.Fatalf("%v: root not inlined: %v", p, root)
		}
		if id == runtimeschema.OpenAIResponses && (bound["strict"] != true || root["additionalProperties"] != false) {
			t.Fatalf("openai_responses: %v", bound)
		}
	}
}
