package catalog

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// argStrings cover every escaping rule of encoding/json.
var argStrings = []string{"", "plain", "with space", `quo"te`, `back\slash`, "<script>&amp;</script>", "line\nbreak\ttab\r", "\x00\x01\x1f\x7f",
	"\b\f", "caf\u00e9", "\u2028\u2029", "emoji \U0001F600", "bad \xff\xfe utf8", "\u00a0nbsp", "a/b", "路径"}

var argNumbers = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e21, -1e-9, 123456789012345678, 3.141592653589793,
	math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-100, 2.5e-300, 100, 1e6}

func randValue(r *rand.Rand, depth int) *structpb.Value {
	n := 6
	if depth > 3 {
		n = 4 // leaves only
	}
	switch r.IntN(n) {
	case 0:
		return structpb.NewStringValue(argStrings[r.IntN(len(argStrings))])
	case 1:
		if r.IntN(3) == 0 {
			return structpb.NewNumberValue(r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25)))
		}
		return structpb.NewNumberValue(argNumbers[r.IntN(len(argNumbers))])
	case 2:
		return structpb.NewBoolValue(r.IntN(2) == 0)
	case 3:
		if r.IntN(2) == 0 {
			return &structpb.Value{} // no kind
		}
		return structpb.NewNullValue()
	case 4:
		l := &structpb.ListValue{}
		for i := r.IntN(4); i > 0; i-- {
			l.Values = append(l.Values, randValue(r, depth+1))
		}
		return structpb.NewListValue(l)
	default:
		return structpb.NewStructValue(randStruct(r, depth+1))
	}
}

func randStruct(r *rand.Rand, depth int) *structpb.Struct {
	s := &structpb.Struct{}
	if r.IntN(8) == 0 {
		return s // nil Fields
	}
	s.Fields = map[string]*structpb.Value{}
	for i := r.IntN(5); i > 0; i-- {
		s.Fields[argStrings[r.IntN(len(argStrings))]+strings.Repeat("k", r.IntN(3))] = randValue(r, depth)
	}
	return s
}

// TestArgsJSONMatchesEncodingJSON: argsJSON writes exactly what
// json.Marshal(AsMap()) writes, on 20,000 random argument objects over
// every string escape, float form and value kind, NaN and ±Inf included.
func TestArgsJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 2026))
	for i := 0; i < 20000; i++ {
		s := randStruct(r, 0)
		want, werr := json.Marshal(s.AsMap())
		got, gerr := argsJSON(s)
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("case %d:\n got %s (%v)\nwant %s (%v)", i, got, gerr, want, werr)
		}
	}
	for _, odd := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(odd)}})}}
		want, _ := json.Marshal(s.AsMap())
		if got, err := argsJSON(s); err != nil || string(got) != string(want) {
			t.Fatalf("%v: got %s (%v), want %s", odd, got, err, want)
		}
	}
}

func BenchmarkArgsJSON(b *testing.B) {
	s, _ := structpb.NewStruct(map[string]any{"message": "hello", "count": 3, "opts": map[string]any{"deep": true, "list": []any{"a", 1.5}}})
	b.Run("argsJSON", func(b *testing.B) {
		for b.Loop() {
			_, _ = argsJSON(s)
		}
	})
	b.Run("json.Marshal(AsMap)", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(s.AsMap())
		}
	})
}
