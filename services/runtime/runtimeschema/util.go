package runtimeschema

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = deepCopy(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = deepCopy(val)
		}
		return out
	}
	return v
}

// lookupPointer resolves a JSON pointer ("" = the document, "/a/0/b").
func lookupPointer(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// visit calls f on every object in v (depth first), enum/const/default
// values excluded.
func visit(v any, f func(map[string]any)) { visitAny(v, f, true) }

func visitAny(v any, f func(map[string]any), skipValues bool) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, k := range sortedKeys(x) {
			if skipValues && (k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example") {
				continue
			}
			visitAny(x[k], f, skipValues)
		}
	case []any:
		for _, e := range x {
			visitAny(e, f, skipValues)
		}
	}
}

// compact is v as compact JSON with sorted keys.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64, json.Number, int, int64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

func toAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}
