package runtimeschema

import (
	"encoding/json"
	"fmt"
)

// argMap mirrors the bound schema where the arguments' shape differs from
// the MCP tool's: one node per schema position the model fills.
type argMap struct {
	// unwrap: the arguments are the value of this property (a wrapped root).
	unwrap string
	// rename maps a bound property name to the tool's.
	rename map[string]string
	// props are the nodes of the properties, by bound name.
	props map[string]*argMap
	// items is the node of array items.
	items *argMap
	// dropNull: bound properties that were optional (strict mode made them
	// required and nullable): a null value means "not given".
	dropNull map[string]bool
	// jsonText: the value is the JSON text of an object.
	jsonText bool
	// ref: the node is a $ref; its map is the definition's.
	ref string
}

func cloneArgMap(a *argMap) *argMap {
	if a == nil {
		return nil
	}
	out := &argMap{unwrap: a.unwrap, jsonText: a.jsonText, ref: a.ref, items: cloneArgMap(a.items)}
	if a.rename != nil {
		out.rename = map[string]string{}
		for k, v := range a.rename {
			out.rename[k] = v
		}
	}
	if a.dropNull != nil {
		out.dropNull = map[string]bool{}
		for k, v := range a.dropNull {
			out.dropNull[k] = v
		}
	}
	if a.props != nil {
		out.props = map[string]*argMap{}
		for k, v := range a.props {
			out.props[k] = cloneArgMap(v)
		}
	}
	return out
}

// MapArguments maps the arguments of a call the model made against the
// bound form back to the shape the MCP tool's own schema describes: a
// wrapped root is unwrapped, renamed properties get their names back, a
// null for a property strict mode made nullable is removed, objects carried
// as JSON text are decoded. args is not modified.
func (b *Bound) MapArguments(args map[string]any) (map[string]any, error) {
	if b == nil || b.args == nil {
		return args, nil
	}
	m := &mapper{defs: b.defArgs}
	v, err := m.value(b.args, args, "", 0)
	if err != nil {
		return nil, err
	}
	out, _ := v.(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if k := b.args.unwrap; k != "" {
		inner, ok := out[k]
		if !ok {
			return nil, fmt.Errorf("arguments: %q is required (the tool's arguments are given in it)", k)
		}
		im, ok := inner.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("arguments.%s: must be a JSON object, got a JSON %s (MCP tool arguments are an object)", k, jsonKind(inner))
		}
		if len(out) > 1 {
			return nil, fmt.Errorf("arguments: only %q may be given", k)
		}
		return im, nil
	}
	return out, nil
}

// WrapKey is the property a wrapped root is carried in ("" = not wrapped).
func (b *Bound) WrapKey() string {
	if b == nil || b.args == nil {
		return ""
	}
	return b.args.unwrap
}

type mapper struct{ defs map[string]*argMap }

func (m *mapper) value(node *argMap, v any, path string, depth int) (any, error) {
	if node == nil || v == nil {
		return v, nil
	}
	if depth > 256 {
		return nil, fmt.Errorf("arguments%s: nested too deeply", path)
	}
	if node.ref != "" {
		if d := m.defs[node.ref]; d != nil {
			return m.value(d, v, path, depth+1)
		}
		return v, nil
	}
	if node.jsonText {
		if s, ok := v.(string); ok {
			var obj any
			if err := json.Unmarshal([]byte(s), &obj); err != nil {
				return nil, fmt.Errorf("arguments%s: must be the JSON text of an object: %v", path, err)
			}
			if _, ok := obj.(map[string]any); !ok {
				return nil, fmt.Errorf("arguments%s: must be the JSON text of an object, got a JSON %s", path, jsonKind(obj))
			}
			return obj, nil
		}
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if val == nil && node.dropNull[k] {
				continue
			}
			orig := k
			if o, ok := node.rename[k]; ok {
				orig = o
			}
			mv, err := m.value(node.props[k], val, path+"."+k, depth+1)
			if err != nil {
				return nil, err
			}
			out[orig] = mv
		}
		return out, nil
	case []any:
		if node.items == nil {
			return x, nil
		}
		out := make([]any, len(x))
		for i, it := range x {
			mv, err := m.value(node.items, it, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = mv
		}
		return out, nil
	}
	return v, nil
}
