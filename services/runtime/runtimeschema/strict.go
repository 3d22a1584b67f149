package runtimeschema

import (
	"fmt"
	"unicode/utf8"
)

// strict converts the normalised schema for OpenAI strict mode (Structured
// Outputs, "Supported schemas": "all fields must be required", "emulate an
// optional parameter with a union type with null", "additionalProperties:
// false must always be set in objects"). It works on a copy: when the
// schema cannot be strict (a free-form object, a schema accepting any value,
// a limit exceeded) nothing is kept and the tool is bound with strict:
// false, the reason in Bound.StrictFallback.
func (n *normaliser) strict() {
	cp := deepCopy(n.root).(map[string]any)
	st := &strictor{n: n, notes: map[string][]string{}, defs: map[string]*argMap{}}
	root := cloneArgMap(n.args)
	reason := st.node(cp, "", root, 1)
	for _, d := range []string{"$defs", "definitions"} {
		dm, _ := cp[d].(map[string]any)
		for _, name := range sortedKeys(dm) {
			if reason != "" {
				break
			}
			ref := "#/" + d + "/" + escapePointer(name)
			sm, ok := dm[name].(map[string]any)
			if !ok {
				reason = fmt.Sprintf("definition %s is not a schema object", ref)
				break
			}
			st.stringChars += len(name)
			reason = st.node(sm, "/"+d+"/"+escapePointer(name), st.defArgs(ref), 1)
		}
	}
	if reason == "" {
		reason = st.limits()
	}
	if reason != "" {
		n.b.StrictFallback = reason
		n.change(KindStrictUnavailable, "", "strict mode not possible (%s): bound with strict false", reason)
		return
	}
	n.root = cp
	n.args = root
	n.defArgs = st.defs
	n.b.Strict = true
	n.b.Changes = append(n.b.Changes, st.changes...)
	for p, ts := range st.notes {
		for _, t := range ts {
			n.note(p, t)
		}
	}
}

type strictor struct {
	n       *normaliser
	changes []Change
	notes   map[string][]string
	defs    map[string]*argMap

	properties, enumValues, stringChars int
	bigEnum                             string
}

func (st *strictor) defArgs(ref string) *argMap {
	if st.defs[ref] == nil {
		st.defs[ref] = &argMap{}
	}
	return st.defs[ref]
}

func (st *strictor) change(k Kind, path, format string, a ...any) {
	st.changes = append(st.changes, Change{Kind: k, Path: path, Detail: fmt.Sprintf(format, a...)})
}

// node makes s strict; it returns why it cannot be, or "".
func (st *strictor) node(s map[string]any, path string, am *argMap, depth int) string {
	if depth > strictMaxDepth+1 {
		return fmt.Sprintf("nesting deeper than %d levels at %s", strictMaxDepth, pathOr(path))
	}
	for _, k := range sortedKeys(s) {
		if strictKeywords[k] {
			continue
		}
		v := s[k]
		delete(s, k)
		if annotations[k] || k == "nullable" {
			st.change(KindKeywordDropped, path, "%s dropped for strict mode", k)
			continue
		}
		st.notes[path] = append(st.notes[path], fmt.Sprintf("(%s: %s.)", k, clip(compact(v), 300)))
		st.change(KindKeywordDropped, path, "%s dropped for strict mode, constraint moved into the description", k)
	}
	if f, ok := s["format"].(string); ok && !strictFormats[f] {
		delete(s, "format")
		st.notes[path] = append(st.notes[path], fmt.Sprintf("(Format: %s.)", clip(f, 100)))
		st.change(KindKeywordDropped, path, "format %q not supported by strict mode: moved into the description", f)
	}
	if e, ok := s["enum"].([]any); ok {
		st.enumValues += len(e)
		chars := 0
		for _, v := range e {
			if sv, ok := v.(string); ok {
				chars += utf8.RuneCountInString(sv)
			}
		}
		st.stringChars += chars
		if len(e) > strictBigEnum && chars > strictBigEnumMaxChars {
			st.bigEnum = pathOr(path)
		}
	}
	if c, ok := s["const"].(string); ok {
		st.stringChars += utf8.RuneCountInString(c)
	}
	if ref, ok := s["$ref"].(string); ok {
		am.ref = ref
		return ""
	}
	if bs, ok := s["anyOf"].([]any); ok {
		for i, b := range bs {
			bm, ok := b.(map[string]any)
			if !ok {
				return fmt.Sprintf("anyOf branch %d at %s is not a schema object", i, pathOr(path))
			}
			if r := st.node(bm, fmt.Sprintf("%s/anyOf/%d", path, i), am, depth); r != "" {
				return r
			}
		}
	}
	_, hasTy := s["type"]
	_, hasAny := s["anyOf"]
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	if !hasTy && !hasAny && !hasEnum && !hasConst {
		return fmt.Sprintf("a schema accepting any value (no type) at %s", pathOr(path))
	}
	if hasType(s, "object") {
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			if ap, ok := s["additionalProperties"].(bool); !ok || ap {
				return fmt.Sprintf("free-form object at %s", pathOr(path))
			}
			props = map[string]any{}
			s["properties"] = props
		}
		if ap, ok := s["additionalProperties"]; ok && ap != false {
			return fmt.Sprintf("object with additional properties at %s", pathOr(path))
		}
		if _, ok := s["additionalProperties"]; !ok {
			s["additionalProperties"] = false
			st.change(KindStrictClosed, path, "additionalProperties false added")
		}
		required := stringSet(s["required"])
		names := sortedKeys(props)
		st.properties += len(names)
		for _, name := range names {
			st.stringChars += len(name)
			cm, ok := props[name].(map[string]any)
			if !ok {
				return fmt.Sprintf("property %s at %s is not a schema object", name, pathOr(path))
			}
			if am.props == nil {
				am.props = map[string]*argMap{}
			}
			if am.props[name] == nil {
				am.props[name] = &argMap{}
			}
			if r := st.node(cm, path+"/properties/"+escapePointer(name), am.props[name], depth+1); r != "" {
				return r
			}
			if !required[name] {
				if !acceptsNull(cm) {
					props[name] = nullable(cm)
					if am.dropNull == nil {
						am.dropNull = map[string]bool{}
					}
					am.dropNull[name] = true
				}
				st.change(KindStrictNullable, path+"/properties/"+escapePointer(name), "optional property %q made required and nullable", name)
			}
		}
		s["required"] = toAnyList(names)
	}
	if hasType(s, "array") {
		items, ok := s["items"].(map[string]any)
		if !ok {
			return fmt.Sprintf("array without an items schema at %s", pathOr(path))
		}
		if am.items == nil {
			am.items = &argMap{}
		}
		if r := st.node(items, path+"/items", am.items, depth+1); r != "" {
			return r
		}
	}
	return ""
}

func (st *strictor) limits() string {
	switch {
	case st.properties > strictMaxProperties:
		return fmt.Sprintf("%d object properties (strict limit %d)", st.properties, strictMaxProperties)
	case st.enumValues > strictMaxEnumValues:
		return fmt.Sprintf("%d enum values (strict limit %d)", st.enumValues, strictMaxEnumValues)
	case st.stringChars > strictMaxStringChars:
		return fmt.Sprintf("%d characters of names and enum values (strict limit %d)", st.stringChars, strictMaxStringChars)
	case st.bigEnum != "":
		return fmt.Sprintf("enum of more than %d values over %d characters at %s", strictBigEnum, strictBigEnumMaxChars, st.bigEnum)
	}
	return ""
}

func pathOr(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

// acceptsNull reports whether s already admits null.
func acceptsNull(s map[string]any) bool {
	if hasType(s, "null") {
		return true
	}
	if e, ok := s["enum"].([]any); ok {
		for _, v := range e {
			if v == nil {
				return true
			}
		}
	}
	if bs, ok := s["anyOf"].([]any); ok {
		for _, b := range bs {
			if bm, ok := b.(map[string]any); ok && acceptsNull(bm) {
				return true
			}
		}
	}
	return false
}

// nullable returns s admitting null too.
func nullable(s map[string]any) map[string]any {
	if ref, ok := s["$ref"]; ok {
		out := map[string]any{"anyOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
		if d, ok := s["description"]; ok {
			out["description"] = d
		}
		return out
	}
	if c, ok := s["const"]; ok {
		delete(s, "const")
		s["enum"] = []any{c}
	}
	if e, ok := s["enum"].([]any); ok {
		s["enum"] = append(e, nil)
	}
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
	case []any:
		s["type"] = append(t, "null")
	case nil:
		if bs, ok := s["anyOf"].([]any); ok {
			s["anyOf"] = append(bs, map[string]any{"type": "null"})
		}
	}
	return s
}
