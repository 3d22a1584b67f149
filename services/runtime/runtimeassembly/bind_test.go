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
