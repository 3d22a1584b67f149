package authzstore

import (
	"strings"
	"testing"
)

func TestBoundInput(t *testing.T) {
	in := map[string]any{"a": strings.Repeat("x", 1000), "b": map[string]any{"c": []any{"1", 2.0}}, "z": strings.Repeat("y", 5000)}
	out := BoundInput(in, 100, 600)
	if s := out["a"].(string); len(s) > 104 || !strings.HasSuffix(s, "…") {
		t.Fatalf("a not truncated: %d", len(s))
	}
	if out["_truncated"] != true {
		t.Fatal("no truncation marker")
	}
	if _, ok := out["b"].(map[string]any); !ok {
		t.Fatal("nested map lost")
	}
	if BoundInput(nil, 1, 1) != nil {
		t.Fatal("nil input")
	}
	small := BoundInput(map[string]any{"p": "/x"}, 100, 600)
	if small["p"] != "/x" || small["_truncated"] != nil {
		t.Fatalf("small input changed: %v", small)
	}
}
