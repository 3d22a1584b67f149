package runtimeassembly

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
)

// ProfileID maps the contract's ToolProfile onto a runtimeschema profile.
// TOOL_PROFILE_UNSPECIFIED (the v0.1.0 output) maps onto openai_chat: its
// openai and anthropic forms are bound with the same names and argument
// shapes, so a call is mapped back alike. ok is false for an unknown value.
func ProfileID(p runtimev1.ToolProfile) (id runtimeschema.ID, ok bool) {
	switch p {
	case runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED, runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_CHAT:
		return runtimeschema.OpenAIChat, true
	case runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES:
		return runtimeschema.OpenAIResponses, true
	case runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES:
		return runtimeschema.AnthropicMessages, true
	case runtimev1.ToolProfile_TOOL_PROFILE_GEMINI:
		return runtimeschema.Gemini, true
	case runtimev1.ToolProfile_TOOL_PROFILE_MCP:
		return runtimeschema.MCP, true
	}
	return "", false
}

// SchemaTool is t as runtimeschema reads it (the catalog's schema is never
// changed: Normalize copies it).
func SchemaTool(t *Tool) runtimeschema.Tool {
	var in any
	if t.Params != nil {
		in = t.Params.AsMap()
	}
	return runtimeschema.Tool{Name: t.Name, Description: t.Description, InputSchema: in}
}

// BindTool normalises t for profile id and checks the bound form with the
// profile's validator (runtimeschema.Check, written independently of the
// normaliser): a form the provider would reject is never sent; the tool is
// left out with the violations as the reason, like any tool the
// normaliser cannot bind. Bound forms are memoised per catalog generation
// (memo.go bindMemo), so the check runs once per tool, profile and
// generation.
func BindTool(t *Tool, id runtimeschema.ID) (*runtimeschema.Bound, error) {
	b, err := runtimeschema.Normalize(id, SchemaTool(t))
	if err != nil {
		return nil, err
	}
	if errs := runtimeschema.Check(id, b.Render()); len(errs) > 0 {
		reason := "the bound form fails the profile's validator: " + strings.Join(errs, "; ")
		if i := strings.LastIndex(reason[:min(len(reason), 400)], " "); len(reason) > 400 && i > 0 {
			reason = reason[:i] + " ..."
		}
		return nil, &runtimeschema.LeftOut{Tool: t.Name, Profile: id, Reason: reason}
	}
	return b, nil
}

// Bind renders t for a request's profile: the openai and anthropic forms
// (normalised for openai_chat and anthropic_messages) always, and bound in
// the requested profile's form. An error (a *runtimeschema.LeftOut) means
// the tool cannot be bound for the profile and is left out.
func Bind(t *Tool, profile runtimev1.ToolProfile) (*runtimev1.ToolSchema, error) {
	ts := &runtimev1.ToolSchema{Name: t.Name, Source: t.Source}
	forms := []struct {
		id  runtimeschema.ID
		dst **structpb.Struct
	}{{runtimeschema.OpenAIChat, &ts.Openai}, {runtimeschema.AnthropicMessages, &ts.Anthropic}}
	if profile != runtimev1.ToolProfile_TOOL_PROFILE_UNSPECIFIED {
		id, ok := ProfileID(profile)
		if !ok {
			return nil, fmt.Errorf("profile %v: unknown", profile)
		}
		forms = append(forms, struct {
			id  runtimeschema.ID
			dst **structpb.Struct
		}{id, &ts.Bound})
	}
	for _, f := range forms {
		b, err := BindTool(t, f.id)
		if err != nil {
			return nil, err
		}
		s, err := structpb.NewStruct(b.Render())
		if err != nil {
			return nil, &runtimeschema.LeftOut{Tool: t.Name, Profile: f.id, Reason: "bound form is not JSON: " + err.Error()}
		}
		*f.dst = s
	}
	return ts, nil
}

// AnthropicDeferredMax bounds the tools one Messages API request may carry
// with defer_loading (Anthropic, "Tool search tool": up to 10,000 tools in
// the catalog). Above it the profile falls back to names in the prompt and
// a tool_search that returns definitions.
const AnthropicDeferredMax = 10000

// NativeDeferral reports whether the profile binds the view's deferred
// tools natively, with the provider's own tool search:
//
//   - anthropic_messages: every deferred tool that is not promoted goes out
//     with defer_loading: true and tool_search answers with tool_reference
//     blocks, so a promotion leaves the tool definitions — the cached prompt
//     prefix — unchanged (docs/architecture.md §3.1); above
//     AnthropicDeferredMax deferred tools the profile falls back to names in
//     the prompt;
//   - openai_responses: every deferred function that is not promoted goes
//     out with defer_loading: true, tool_search is the client-executed
//     tool_search tool (ResponsesToolSearch) and its result is the
//     tool_search_output item carrying the loaded functions (OpenAI,
//     "Tool search", https://developers.openai.com/api/docs/guides/tools-tool-search
//     §Client-executed tool search; the OpenAI API reference's
//     ToolSearchToolParam, ResponseToolSearchOutputItemParam). The guide
//     states no bound on deferred functions.
func NativeDeferral(profile runtimev1.ToolProfile, v *View) bool {
	if v == nil || !v.Base.HasDeferred() {
		return false
	}
	switch profile {
	case runtimev1.ToolProfile_TOOL_PROFILE_ANTHROPIC_MESSAGES:
		return len(v.Base.DeferredNames) <= AnthropicDeferredMax
	case runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES:
		return true
	}
	return false
}

// ResponsesToolSearch is tool_search's Responses API form under native
// deferral: {"type": "tool_search", "execution": "client", "description",
// "parameters"} (ToolSearchToolParam: "Description shown to the model for a
// client-executed tool search tool", "Parameter schema for a client-executed
// tool search tool"). The model answers it with a tool_search_call item
// whose arguments follow parameters; ExecuteToolCall of that call (name
// tool_search, id the call_id) returns the tool_search_output item
// (ResponsesToolSearchOutput).
func ResponsesToolSearch(t *Tool) map[string]any {
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	if t.Params != nil {
		params = t.Params.AsMap()
	}
	return map[string]any{"type": "tool_search", "execution": "client", "description": t.Description, "parameters": params}
}

// ResponsesToolSearchOutput is the tool_search_output input item that
// answers the tool_search_call callID (ResponseToolSearchOutputItemParam:
// type, call_id, execution "client", status, tools — "The loaded tool
// definitions returned by the tool search output"). loaded are the
// functions in their openai_responses form, each with defer_loading: true
// as the request's tools declare it; an empty search loads none but still
// answers the call (every client tool_search_call needs its output).
func ResponsesToolSearchOutput(callID string, loaded []map[string]any) map[string]any {
	tools := make([]any, 0, len(loaded))
	for _, f := range loaded {
		tools = append(tools, f)
	}
	return map[string]any{"type": "tool_search_output", "call_id": callID, "execution": "client", "status": "completed", "tools": tools}
}

// SearchForm is how tool_search shows a found tool to the model: its name,
// description and input schema as the call's profile binds them (what the
// model can call), not the catalog's raw schema. A tool the profile cannot
// bind is shown with the reason it is left out.
func SearchForm(t *Tool, profile runtimev1.ToolProfile) map[string]any {
	id, ok := ProfileID(profile)
	if !ok {
		id = runtimeschema.OpenAIChat
	}
	b, err := BindTool(t, id)
	if err != nil {
		return map[string]any{"name": t.Name, "description": t.Description, "left_out": leftOutReason(err)}
	}
	out := map[string]any{"name": b.Name, "description": b.Description}
	if b.Parameters != nil { // gemini binds a tool without arguments without parameters
		out["parameters"] = b.Parameters
	}
	return out
}

// UnpromotedDeferred lists the view's deferred tools that are not promoted
// and that the skill policy allows, in name order.
func UnpromotedDeferred(v *View) []*Tool {
	var out []*Tool
	for _, n := range v.Base.DeferredNames {
		if v.Promoted[n] || !v.Allows(n) {
			continue
		}
		if t := v.Base.Deferred[n]; t != nil {
			out = append(out, t)
		}
	}
	return out
}
