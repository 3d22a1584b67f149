package runtimechain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// DecodeArguments decodes raw_arguments when the call carries JSON text
// instead of a Struct. Malformed arguments are the model's mistake: a
// BUSINESS error it can fix. Absent arguments are an empty object.
type DecodeArguments struct{}

// Name implements Step.
func (DecodeArguments) Name() string { return "decode_arguments" }

// Description implements Step.
func (DecodeArguments) Description() string {
	return "raw_arguments JSON becomes the argument object; malformed JSON is a BUSINESS error"
}

// Run implements Step.
func (DecodeArguments) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	if c.ArgsPB == nil && strings.TrimSpace(c.RawArguments) != "" {
		var probe map[string]any
		if err := json.Unmarshal([]byte(c.RawArguments), &probe); err != nil {
			return searchAnswered(c, &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Text: fmt.Sprintf("Error: Tool '%s' arguments are not a valid JSON object: %s. Send the arguments as one JSON object.", c.Name, TruncDetail(err.Error()))}), nil
		}
		pb, err := structpb.NewStruct(probe)
		if err != nil {
			return searchAnswered(c, &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_BUSINESS, Text: fmt.Sprintf("Error: Tool '%s' arguments are not a valid JSON object: %s.", c.Name, TruncDetail(err.Error()))}), nil
		}
		c.ArgsPB = pb
	}
	if c.ArgsPB == nil {
		c.ArgsPB = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	c.Args = c.ArgsPB.AsMap()
	return next(ctx, c)
}
