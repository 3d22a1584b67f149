package runtimechain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// ArgumentLimits is runtime.limits.tool_arguments: bounds of one tool
// call's arguments, checked before they are decoded (docs/architecture.md
// §5, "Bounded cost").
type ArgumentLimits struct {
	// MaxBytes bounds raw_arguments (bytes of JSON text) or the encoded
	// size of the arguments Struct.
	MaxBytes int
	// MaxDepth bounds the nesting of objects and arrays (the argument
	// object itself is depth 1).
	MaxDepth int
	// MaxElements bounds the number of values (object members and array
	// items, at every depth).
	MaxElements int
	// ValidateSchema: the map_arguments step checks a catalog tool's
	// arguments against the input schema the model saw
	// (runtime.limits.tool_arguments.validate_schema).
	ValidateSchema bool
}

// Default argument limits (runtime.limits.tool_arguments).
const (
	DefaultArgumentMaxBytes    = 4 << 20
	DefaultArgumentMaxDepth    = 64
	DefaultArgumentMaxElements = 100000
)

// LimitError names the limit a request exceeded: the config key, its
// value and what was seen (reported as INVALID_ARGUMENT by the RPC
// validation and as a POLICY refusal by the InputBudget step).
type LimitError struct {
	// Key is the config key of the limit, e.g. "runtime.limits.tool_arguments.max_depth".
	Key string
	// Limit is its value.
	Limit int
	// What describes what exceeded it.
	What string
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s exceeds %s (%d)", e.What, e.Key, e.Limit)
}

const argKey = "runtime.limits.tool_arguments."

// CheckArguments checks a call's arguments against l without building
// them: raw JSON text is measured by length first and then scanned token
// by token (memory bounded by the depth, not the size); a Struct by its
// encoded size and a walk. nil when within every bound (or l is zero).
func CheckArguments(l ArgumentLimits, raw string, pb *structpb.Struct) *LimitError {
	if pb != nil {
		if l.MaxBytes > 0 {
			if n := proto.Size(pb); n > l.MaxBytes {
				return &LimitError{Key: argKey + "max_bytes", Limit: l.MaxBytes, What: fmt.Sprintf("arguments of %d bytes", n)}
			}
		}
		elems := 0
		return walkStruct(l, pb, 1, &elems)
	}
	if l.MaxBytes > 0 && len(raw) > l.MaxBytes {
		return &LimitError{Key: argKey + "max_bytes", Limit: l.MaxBytes, What: fmt.Sprintf("raw_arguments of %d bytes", len(raw))}
	}
	if raw == "" {
		return nil
	}
	return scanJSON(l, raw)
}

func walkStruct(l ArgumentLimits, s *structpb.Struct, depth int, elems *int) *LimitError {
	if l.MaxDepth > 0 && depth > l.MaxDepth {
		return &LimitError{Key: argKey + "max_depth", Limit: l.MaxDepth, What: fmt.Sprintf("arguments nested deeper than %d", l.MaxDepth)}
	}
	for _, v := range s.GetFields() {
		if err := walkValue(l, v, depth, elems); err != nil {
			return err
		}
	}
	return nil
}

func walkValue(l ArgumentLimits, v *structpb.Value, depth int, elems *int) *LimitError {
	*elems++
	if l.MaxElements > 0 && *elems > l.MaxElements {
		return &LimitError{Key: argKey + "max_elements", Limit: l.MaxElements, What: fmt.Sprintf("arguments with more than %d values", l.MaxElements)}
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return walkStruct(l, k.StructValue, depth+1, elems)
	case *structpb.Value_ListValue:
		if l.MaxDepth > 0 && depth+1 > l.MaxDepth {
			return &LimitError{Key: argKey + "max_depth", Limit: l.MaxDepth, What: fmt.Sprintf("arguments nested deeper than %d", l.MaxDepth)}
		}
		for _, x := range k.ListValue.GetValues() {
			if err := walkValue(l, x, depth+1, elems); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanJSON counts depth and values of JSON text with the streaming
// tokenizer. Malformed JSON is left to DecodeArguments (a BUSINESS error
// the model can fix).
func scanJSON(l ArgumentLimits, raw string) *LimitError {
	dec := json.NewDecoder(strings.NewReader(raw))
	depth, elems := 0, 0
	// inObject[i] reports whether level i is an object (whose keys are
	// tokens too, not values).
	var inObject []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			depth--
			inObject = inObject[:len(inObject)-1]
			expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
			continue
		}
		if expectKey {
			expectKey = false // this token is a member name
			continue
		}
		if depth > 0 {
			elems++
			if l.MaxElements > 0 && elems > l.MaxElements {
				return &LimitError{Key: argKey + "max_elements", Limit: l.MaxElements, What: fmt.Sprintf("arguments with more than %d values", l.MaxElements)}
			}
		}
		if d, ok := tok.(json.Delim); ok {
			depth++
			if l.MaxDepth > 0 && depth > l.MaxDepth {
				return &LimitError{Key: argKey + "max_depth", Limit: l.MaxDepth, What: fmt.Sprintf("arguments nested deeper than %d", l.MaxDepth)}
			}
			inObject = append(inObject, d == '{')
			expectKey = d == '{'
			continue
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

// InputBudget bounds a call's arguments (runtime.limits.tool_arguments)
// before they are decoded or authorized: a call over a bound is refused
// (POLICY, reason "input_budget.exceeded", the text naming the limit)
// without decoding, authorization or dispatch. Requests reaching the RPCs
// are already refused as INVALID_ARGUMENT by the runtime's validation with
// the same check; this step covers the agent loop (model output) too.
type InputBudget struct{ Limits ArgumentLimits }

// Name implements Step.
func (InputBudget) Name() string { return "input_budget" }

// Description implements Step.
func (InputBudget) Description() string {
	return "arguments over runtime.limits.tool_arguments (bytes, depth, values) are refused before decoding"
}

// Run implements Step.
func (s InputBudget) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if err := CheckArguments(s.Limits, c.RawArguments, c.ArgsPB); err != nil {
		return searchAnswered(c, PolicyErr("input_budget.exceeded", "Guardrail denied: tool '%s' was not run (input_budget.exceeded): %s. Send smaller arguments.", c.Name, err.Error())), nil
	}
	return next(ctx, c)
}
