package runtimechain

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
)

// MapArguments maps a call made against a tool's bound form (the call's
// profile, docs/architecture.md §3.1) back to the MCP tool's own shape
// before anything reads the arguments: a name mapped for the provider's
// name rules gets the tool's name back, a wrapped root union is
// unwrapped, properties renamed for the provider get their names back,
// nulls strict mode made up for optional properties are removed, objects
// carried as JSON text are decoded (runtimeschema.Bound.MapArguments).
// Arguments that cannot be mapped are a BUSINESS error the model can fix.
//
// With Validate, a catalog tool's arguments are first checked against the
// input schema the model saw — the profile's bound parameters (JSON Schema
// 2020-12) — and a mismatch is a BUSINESS error naming the JSON pointer of
// the failing value; the tool is not called. Gemini's OpenAPI-subset form
// and a caller sending the tool's own shape are checked after mapping,
// against the tool's own schema. Built-in tools check their
// own arguments (docs/decisions/0093-arguments-checked-against-the-bound-schema.md).
type MapArguments struct {
	// Validate is runtime.limits.tool_arguments.validate_schema.
	Validate bool
}

// Name implements Step.
func (MapArguments) Name() string { return "map_arguments" }

// Description implements Step.
func (MapArguments) Description() string {
	return "name and arguments mapped back from the profile's bound form to the MCP tool's shape (wrapped unions unwrapped)"
}

// Run implements Step.
func (m MapArguments) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.IsToolSearch() {
		o, err := next(ctx, c)
		if err == nil && o != nil {
			toolReferences(c, o)
		}
		return o, err
	}
	if c.View == nil {
		return next(ctx, c)
	}
	id, ok := runtimeassembly.ProfileID(c.Profile)
	if !ok {
		return next(ctx, c)
	}
	t := c.Tool()
	if t == nil {
		if t = boundByName(c.View, id, c.Name); t == nil {
			return next(ctx, c) // tool_lookup answers
		}
		c.BoundName, c.Name = c.Name, t.Name
	}
	// A deferred tool that is not promoted is refused further in
	// (deferred.not_promoted): its arguments are not checked first.
	unpromoted := c.View.Base.Deferred[t.Name] != nil && !c.View.Promoted[t.Name]
	check := m.Validate && t.Source != runtimeassembly.SourceBuiltin && !unpromoted
	b, err := runtimeassembly.BindTool(t, id)
	if err != nil {
		// Left out of the binding: the model saw no other shape.
		if check {
			if err := runtimeschema.ValidateOwnArguments(runtimeassembly.SchemaTool(t), c.Args); err != nil {
				return schemaMismatch(c, err), nil
			}
		}
		return next(ctx, c)
	}
	if k := b.WrapKey(); k != "" {
		if _, given := c.Args[k]; !given {
			// A caller that sends the tool's own shape (a v0.1.0 client
			// calling the tool directly) is passed through.
			if check {
				if err := runtimeschema.ValidateOwnArguments(runtimeassembly.SchemaTool(t), c.Args); err != nil {
					return schemaMismatch(c, err), nil
				}
			}
			return next(ctx, c)
		}
	}
	if check && id != runtimeschema.Gemini {
		if err := b.ValidateArguments(c.Args); err != nil {
			return schemaMismatch(c, err), nil
		}
	}
	args, err := b.MapArguments(c.Args)
	if err != nil {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS,
			Text: fmt.Sprintf("Error: Tool '%s' %s. Send the arguments in the shape of the tool's schema.", c.Name, TruncDetail(err.Error()))}, nil
	}
	if check && id == runtimeschema.Gemini {
		if err := runtimeschema.ValidateOwnArguments(runtimeassembly.SchemaTool(t), args); err != nil {
			return schemaMismatch(c, err), nil
		}
	}
	pb, err := structpb.NewStruct(args)
	if err != nil {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Text: fmt.Sprintf("Error: Tool '%s' arguments: %s.", c.Name, TruncDetail(err.Error()))}, nil
	}
	c.Args, c.ArgsPB = args, pb
	return next(ctx, c)
}

// schemaMismatch is the refusal of arguments that fail the tool's input
// schema: the JSON pointer and the reason, for the model to fix.
func schemaMismatch(c *Call, err error) *Outcome {
	return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Text: fmt.Sprintf(
		"Error: Tool '%s' arguments do not match its input schema %s. The tool was not run; send arguments that match the schema.", c.Name, TruncDetail(err.Error()))}
}

// boundByName finds the tool of the view whose bound name under profile
// id is name (only names the profile had to map can differ).
func boundByName(v *runtimeassembly.View, id runtimeschema.ID, name string) *runtimeassembly.Tool {
	p, _ := runtimeschema.Get(id)
	for _, t := range v.Base.ByName {
		if p.NameValid(t.Name) {
			continue
		}
		if b, err := runtimeassembly.BindTool(t, id); err == nil && b.Name == name {
			return t
		}
	}
	return nil
}

// searchAnswered gives a tool_search refused before map_arguments (its
// arguments too large or not JSON) its provider-native form too: under
// openai_responses the call still needs its tool_search_output.
func searchAnswered(c *Call, o *Outcome) *Outcome {
	if c.IsToolSearch() {
		toolReferences(c, o)
	}
	return o
}

// toolReferences gives a tool_search result its provider-native form under
// native deferral (runtimeassembly.NativeDeferral), by the names the model
// sees:
//
//   - anthropic_messages: one tool_reference block per promoted tool
//     ("Tool search tool", custom client-side search returns tool_reference
//     blocks), {"content": [...]};
//   - openai_responses: the tool_search_output item answering the
//     tool_search_call (call_id = the call's id) with the loaded functions
//     in their openai_responses form — always, also when nothing was found
//     or the search failed, because every client-executed tool_search_call
//     needs its output (runtimeassembly.ResponsesToolSearchOutput).
func toolReferences(c *Call, o *Outcome) {
	if !runtimeassembly.NativeDeferral(c.Profile, c.View) {
		return
	}
	if c.Profile == runtimev1.ToolProfile_TOOL_PROFILE_OPENAI_RESPONSES {
		var loaded []map[string]any
		for _, n := range o.Promoted.GetNames() {
			t := c.View.Base.Deferred[n]
			if t == nil {
				continue
			}
			b, err := runtimeassembly.BindTool(t, runtimeschema.OpenAIResponses)
			if err != nil {
				continue // left out of the profile: not loadable
			}
			f := b.Render()
			f["defer_loading"] = true
			loaded = append(loaded, f)
		}
		if s, err := structpb.NewStruct(runtimeassembly.ResponsesToolSearchOutput(c.CallID, loaded)); err == nil {
			o.ProviderOutput = s
		}
		return
	}
	if len(o.Promoted.GetNames()) == 0 {
		return
	}
	var blocks []any
	for _, n := range o.Promoted.GetNames() {
		name := n
		if t := c.View.Base.Deferred[n]; t != nil {
			if b, err := runtimeassembly.BindTool(t, runtimeschema.AnthropicMessages); err == nil {
				name = b.Name
			}
		}
		blocks = append(blocks, map[string]any{"type": "tool_reference", "tool_name": name})
	}
	if s, err := structpb.NewStruct(map[string]any{"content": blocks}); err == nil {
		o.ProviderOutput = s
	}
}
