package catalog

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// argsJSON encodes a call's arguments for tools/call straight from the
// protobuf Struct, byte for byte what json.Marshal(args.AsMap()) wrote
// before (keys sorted, the same float and string forms; NaN and ±Inf as
// the strings "NaN", "Infinity", "-Infinity", as AsInterface has them), without building the map[string]any copy first: one pass
// instead of two conversions on every CallTool (docs/performance.md,
// "Cheaper hops"). argsjson_test.go checks the equality differentially.
func argsJSON(s *structpb.Struct) ([]byte, error) {
	return appendStruct(make([]byte, 0, 128), s)
}

func appendStruct(b []byte, s *structpb.Struct) ([]byte, error) {
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json sorts map keys as strings
	b = append(b, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		if b, err = appendValue(b, fields[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue), nil
	case *structpb.Value_NumberValue:
		return appendFloat(b, k.NumberValue), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		var err error
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default: // NullValue, or no kind (AsInterface: nil)
		return append(b, "null"...), nil
	}
}

// appendFloat writes f as encoding/json does for a float64 (the
// non-finite ones as structpb's AsInterface turns them into strings).
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9, as encoding/json
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString writes s quoted. Printable ASCII without '"', '\\', '<',
// '>' and '&' is copied; any other string is left to encoding/json, so
// every escape (HTML characters, U+2028, invalid UTF-8, control bytes) is
// exactly its own.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
