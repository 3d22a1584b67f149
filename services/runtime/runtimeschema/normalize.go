package runtimeschema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Tool is an MCP tool definition as the catalog holds it.
type Tool struct {
	// Name is the tool's (Toolplane) name.
	Name string
	// Description is the tool's description.
	Description string
	// InputSchema is the decoded inputSchema: a map, nil (none) or a bool.
	InputSchema any
}

// Kind names one kind of change the normaliser made.
type Kind string

// The change kinds.
const (
	KindNameMapped       Kind = "name_mapped"
	KindDescriptionCut   Kind = "description_truncated"
	KindSchemaMissing    Kind = "schema_missing_replaced"
	KindRootTypeAdded    Kind = "root_type_added"
	KindRootUnionMerged  Kind = "root_union_merged"
	KindRootUnionWrapped Kind = "root_union_wrapped"
	// KindRootNonObjectWrap is no longer produced: a root no object can
	// match is left out (docs/decisions/0096-only-object-branches-at-the-root.md).
	KindRootNonObjectWrap   Kind = "root_non_object_wrapped"
	KindPropertiesAdded     Kind = "properties_added"
	KindRefInlined          Kind = "ref_inlined"
	KindRefCycleCut         Kind = "ref_cycle_cut"
	KindRefUnresolved       Kind = "ref_unresolved"
	KindKeywordDropped      Kind = "keyword_dropped"
	KindKeywordRenamed      Kind = "keyword_renamed"
	KindTypeListSplit       Kind = "type_list_split"
	KindEnumMoved           Kind = "enum_moved_to_description"
	KindItemsAdded          Kind = "items_added"
	KindTupleItems          Kind = "tuple_items_merged"
	KindPropertyRenamed     Kind = "property_renamed"
	KindObjectAsJSONText    Kind = "object_as_json_text"
	KindRequiredFixed       Kind = "required_fixed"
	KindStrictNullable      Kind = "strict_optional_as_nullable"
	KindStrictClosed        Kind = "strict_additional_properties_closed"
	KindParametersOmitted   Kind = "parameters_omitted"
	KindBooleanSchema       Kind = "boolean_schema_replaced"
	KindStrictUnavailable   Kind = "strict_unavailable"
	KindNullableTypeRewrite Kind = "nullable_rewritten"
	KindRootBranchDropped   Kind = "root_branch_dropped"
)

// Change is one change made to a tool for a profile.
type Change struct {
	// Kind of change.
	Kind Kind
	// Path is the JSON pointer of the schema node ("" = the tool itself).
	Path string
	// Detail says what was done.
	Detail string
}

// Bound is a tool in one profile's form.
type Bound struct {
	// Profile is the profile's id.
	Profile ID
	// Name is the name the provider sees.
	Name string
	// Original is the MCP tool's name.
	Original string
	// Description is the description the provider sees.
	Description string
	// Parameters is the bound schema (nil = omitted: a tool without
	// arguments in a profile that omits them).
	Parameters map[string]any
	// Strict is OpenAI strict mode (strict profiles only).
	Strict bool
	// StrictFallback says why a strict profile bound the tool non-strict.
	StrictFallback string
	// Changes lists what was changed, in a deterministic order.
	Changes []Change

	args    *argMap
	defArgs map[string]*argMap
}

// LeftOut is the error of a tool that cannot be bound for a profile.
type LeftOut struct {
	// Tool is the tool's name.
	Tool string
	// Profile is the profile.
	Profile ID
	// Reason says why, in one line.
	Reason string
}

func (e *LeftOut) Error() string {
	return fmt.Sprintf("tool %q left out of profile %s: %s", e.Tool, e.Profile, e.Reason)
}

// Changed reports whether the tool needed any change.
func (b *Bound) Changed() bool { return len(b.Changes) > 0 }

// Kinds returns the distinct change kinds, sorted.
func (b *Bound) Kinds() []Kind {
	seen := map[Kind]bool{}
	var out []Kind
	for _, c := range b.Changes {
		if !seen[c.Kind] {
			seen[c.Kind] = true
			out = append(out, c.Kind)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Normalize binds t for profile id. The input is never modified. It returns
// a *LeftOut error when the tool cannot be made valid for the profile.
func Normalize(id ID, t Tool) (*Bound, error) {
	p, ok := profiles[id]
	if !ok {
		return nil, fmt.Errorf("profile %q: unknown (want one of %v)", id, IDs)
	}
	n := &normaliser{p: p, b: &Bound{Profile: id, Original: t.Name}, args: &argMap{}}
	if err := n.run(t); err != nil {
		return nil, &LeftOut{Tool: t.Name, Profile: id, Reason: err.Error()}
	}
	n.b.args = n.args
	n.b.defArgs = n.defArgs
	return n.b, nil
}

type normaliser struct {
	p    *Profile
	b    *Bound
	args *argMap
	root map[string]any
	// notes are constraint texts per node path, appended to that node's
	// description at the end (root notes go to the tool description).
	notes map[string][]string
	nodes int
	// defArgs are the argument maps of $defs entries (strict mode).
	defArgs map[string]*argMap
}

func (n *normaliser) change(k Kind, path, format string, a ...any) {
	n.b.Changes = append(n.b.Changes, Change{Kind: k, Path: path, Detail: fmt.Sprintf(format, a...)})
}

func (n *normaliser) note(path, text string) {
	if n.notes == nil {
		n.notes = map[string][]string{}
	}
	n.notes[path] = append(n.notes[path], text)
}

func (n *normaliser) run(t Tool) error {
	if err := n.name(t.Name); err != nil {
		return err
	}
	n.b.Description = t.Description
	var root map[string]any
	switch s := t.InputSchema.(type) {
	case nil:
		root = map[string]any{}
		n.change(KindSchemaMissing, "", "no input schema: bound as an object without properties")
	case bool:
		if !s {
			return fmt.Errorf("input schema is false: the tool accepts no arguments at all")
		}
		root = map[string]any{}
		n.change(KindSchemaMissing, "", "input schema true: bound as an object without properties")
	case map[string]any:
		root = deepCopy(s).(map[string]any)
	default:
		return fmt.Errorf("input schema is a JSON %s, not an object", jsonKind(s))
	}
	n.root = root
	if err := emptyCombinator(root, ""); err != nil {
		return err
	}
	if err := n.fixRoot(); err != nil {
		return err
	}
	if n.p.RootOnly {
		n.dropDangling()
	} else {
		if err := n.resolveRefs(); err != nil {
			return err
		}
		n.walk(n.root, "", n.args, true)
		if n.p.Strict {
			n.strict()
		}
	}
	n.applyNotes()
	if err := n.description(); err != nil {
		return err
	}
	if n.p.NoParamsOmitted {
		if props, _ := n.root["properties"].(map[string]any); len(props) == 0 && n.args.unwrap == "" {
			n.root = nil
			n.change(KindParametersOmitted, "", "no arguments: parameters left unset")
		}
	}
	if n.root != nil {
		raw, err := json.Marshal(n.root)
		if err != nil {
			return fmt.Errorf("schema cannot be encoded as JSON: %v", err)
		}
		if len(raw) > maxBoundSchemaBytes {
			return fmt.Errorf("schema is %d bytes after normalisation (limit %d)", len(raw), maxBoundSchemaBytes)
		}
	}
	n.b.Parameters = n.root
	return nil
}

// name maps the tool name onto the profile's pattern.
func (n *normaliser) name(name string) error {
	if name == "" {
		return fmt.Errorf("name: must not be empty")
	}
	if n.p.NamePattern.MatchString(name) {
		n.b.Name = name
		return nil
	}
	var sb strings.Builder
	for i, r := range name {
		ok := r < utf8.RuneSelf && (r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' && (n.p.ID == Gemini || n.p.ID == MCP))
		if n.p.ID == Gemini && i == 0 && !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			sb.WriteByte('_')
		}
		if ok {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	out := sb.String()
	if n.p.NameMax > 0 && len(out) > n.p.NameMax || out != name {
		// A mapped name carries a hash of the original so two names that
		// sanitise alike stay apart.
		sum := sha256.Sum256([]byte(name))
		suffix := "_" + hex.EncodeToString(sum[:])[:8]
		if n.p.NameMax > 0 && len(out)+len(suffix) > n.p.NameMax {
			out = out[:n.p.NameMax-len(suffix)]
		}
		out += suffix
	}
	if !n.p.NamePattern.MatchString(out) {
		return fmt.Errorf("name %q cannot be mapped onto the profile's name pattern", name)
	}
	n.b.Name = out
	n.change(KindNameMapped, "", "name %q bound as %q", name, out)
	return nil
}

func (n *normaliser) description() error {
	d := n.b.Description
	if n.p.DescriptionMax > 0 && utf8.RuneCountInString(d) > n.p.DescriptionMax {
		r := []rune(d)
		const tail = " …(truncated)"
		d = string(r[:n.p.DescriptionMax-utf8.RuneCountInString(tail)]) + tail
		n.change(KindDescriptionCut, "", "description cut to %d characters", n.p.DescriptionMax)
	}
	n.b.Description = d
	return nil
}

// applyNotes appends the moved constraints to each node's description, in
// path order; root notes go to the tool's description.
func (n *normaliser) applyNotes() {
	paths := make([]string, 0, len(n.notes))
	for p := range n.notes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		text := strings.Join(n.notes[p], " ")
		if p == "" || n.root == nil {
			n.b.Description = joinText(n.b.Description, text)
			continue
		}
		node := lookupPointer(n.root, p)
		m, ok := node.(map[string]any)
		if !ok {
			n.b.Description = joinText(n.b.Description, text)
			continue
		}
		d, _ := m["description"].(string)
		m["description"] = joinText(d, text)
	}
}

func joinText(a, b string) string {
	a = strings.TrimRight(a, " \n")
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// ---- root ----

// objectish reports whether s describes only objects: type "object", or no
// type with object keywords. A $ref cycle is not objectish (it is never
// followed twice: a hostile schema must not exhaust the stack).
func objectish(s any, defs func(string) (any, bool)) bool {
	return objectishSeen(s, defs, map[string]bool{})
}

func objectishSeen(s any, defs func(string) (any, bool), seen map[string]bool) bool {
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	if ref, ok := m["$ref"].(string); ok {
		t, ok := defs(ref)
		if !ok || seen[ref] {
			return false
		}
		seen[ref] = true
		defer delete(seen, ref)
		return objectishSeen(t, defs, seen)
	}
	switch ty := m["type"].(type) {
	case string:
		return ty == "object"
	case nil:
		_, hasProps := m["properties"]
		_, hasReq := m["required"]
		if hasProps || hasReq {
			return true
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if bs, ok := m[k].([]any); ok && len(bs) > 0 {
				for _, b := range bs {
					if !objectishSeen(b, defs, seen) {
						return false
					}
				}
				return true
			}
		}
		return false
	}
	return false
}

func (n *normaliser) resolveLocal(ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	v := lookupPointer(n.root, strings.TrimPrefix(ref, "#"))
	return v, v != nil
}

// emptyCombinator finds an empty anyOf, oneOf or allOf anywhere in s
// (JSON Schema 2020-12 §10.2.1: each must be a non-empty array). An empty
// anyOf/oneOf matches nothing, so the node is unsatisfiable; a strict
// profile would even turn an optional one into "null only". The tool is
// left out rather than bound with a schema no call, or the wrong calls,
// satisfy. Values of the data keywords (const, enum, default, examples)
// are not schemas and are not searched.
func emptyCombinator(s any, path string) error {
	switch v := s.(type) {
	case map[string]any:
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if bs, ok := v[k].([]any); ok && len(bs) == 0 {
				why := "JSON Schema requires a non-empty list"
				if k != "allOf" {
					why = "no value can match it"
				}
				if path == "" {
					return fmt.Errorf("root %s is an empty list: %s", k, why)
				}
				return fmt.Errorf("%s: %s is an empty list: %s", path, k, why)
			}
		}
		for _, k := range sortedKeys(v) {
			switch k {
			case "const", "enum", "default", "examples":
				continue
			}
			if err := emptyCombinator(v[k], path+"/"+escapePointer(k)); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if err := emptyCombinator(x, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// inlineRootRef resolves a root that is a local $ref before any other root
// rule, in every profile: the root is what the provider reads first and
// none of them resolves a $ref there. A chain of root $refs is followed;
// a target that can be an object is inlined into the root (the root's own
// keywords win), a target no object can match, a cycle or a $ref that
// does not resolve locally leaves the tool out
// (docs/decisions/0096-only-object-branches-at-the-root.md, addendum).
func (n *normaliser) inlineRootRef() error {
	r := n.root
	ref, ok := r["$ref"].(string)
	if !ok {
		return nil
	}
	first := ref
	seen := map[string]bool{}
	var target map[string]any
	for {
		if seen[ref] || ref == "#" || ref == "" {
			return fmt.Errorf("root $ref %s is a cycle: it never reaches a schema", first)
		}
		seen[ref] = true
		t, ok := n.resolveLocal(ref)
		if !ok {
			return fmt.Errorf("root $ref %s does not resolve to a schema in the tool's own schema", first)
		}
		tm, isMap := t.(map[string]any)
		if !isMap {
			if b, isBool := t.(bool); isBool && b {
				tm = map[string]any{}
			} else {
				return fmt.Errorf("root $ref %s is a JSON %s, not a schema that accepts an object", first, jsonKind(t))
			}
		}
		next, more := tm["$ref"].(string)
		if !more {
			target = tm
			break
		}
		ref = next
	}
	if !canBeObject(target, n.resolveLocal, map[string]bool{}) {
		return fmt.Errorf("root $ref %s is %s: MCP tools/call arguments are always an object, so no call could match", first, clip(compact(target), 120))
	}
	delete(r, "$ref")
	for k, v := range deepCopy(target).(map[string]any) {
		if _, has := r[k]; !has {
			r[k] = v
		}
	}
	n.change(KindRefInlined, "", "root $ref %s inlined", first)
	return nil
}

func (n *normaliser) fixRoot() error {
	r := n.root
	if err := n.inlineRootRef(); err != nil {
		return err
	}
	r = n.root
	defs := n.resolveLocal
	ty := r["type"]
	if tl, ok := ty.([]any); ok {
		hasObj := false
		for _, t := range tl {
			if t == "object" {
				hasObj = true
			}
		}
		if hasObj {
			r["type"] = "object"
			n.change(KindRootTypeAdded, "", "root type %s narrowed to object", compact(tl))
			ty = "object"
		}
	}
	if err := n.dropNonObjectBranches(); err != nil {
		return err
	}
	ty = r["type"]
	combos := []string{}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if _, ok := r[k]; ok {
			combos = append(combos, k)
		}
	}
	switch {
	case ty == nil && len(combos) == 0 && r["enum"] == nil && r["const"] == nil && r["not"] == nil:
		r["type"] = "object"
		if len(r) > 1 {
			n.change(KindRootTypeAdded, "", "type object added at the root")
		}
	case ty == nil || ty == "object":
		if len(combos) > 0 || r["enum"] != nil || r["const"] != nil {
			allObj := r["enum"] == nil && r["const"] == nil
			for _, k := range combos {
				bs, _ := r[k].([]any)
				if len(bs) == 0 {
					allObj = false
				}
				for _, b := range bs {
					if !objectish(b, defs) {
						allObj = false
					}
				}
			}
			if n.p.RootOnly {
				if allObj {
					if ty == nil {
						r["type"] = "object"
						n.change(KindRootTypeAdded, "", "type object added at the root (every %s branch is an object)", strings.Join(combos, "/"))
					}
				} else {
					n.wrap("root union with a branch that is not an object")
				}
			} else if allObj && n.merge(combos) {
				// merged
			} else {
				n.wrap(fmt.Sprintf("root %s cannot be merged into one object", strings.Join(append(combos, keysOf(r, "enum", "const")...), "/")))
			}
		} else if ty == nil {
			r["type"] = "object"
			n.change(KindRootTypeAdded, "", "type object added at the root")
		}
	default:
		// Unreachable: dropNonObjectBranches left out a root whose type
		// excludes object.
		return fmt.Errorf("root type %s is not object", compact(ty))
	}
	r = n.root
	if !n.p.RootOnly {
		for _, k := range []string{"not", "if", "then", "else", "dependentRequired", "dependentSchemas"} {
			if v, ok := r[k]; ok {
				delete(r, k)
				n.note("", fmt.Sprintf("Constraint on the arguments (%s): %s.", k, clip(compact(v), 400)))
				n.change(KindKeywordDropped, "", "root %s dropped, constraint moved into the description", k)
			}
		}
	}
	props, has := r["properties"]
	switch pm := props.(type) {
	case map[string]any:
	case nil:
		if has {
			return fmt.Errorf("properties: null at the root")
		}
		r["properties"] = map[string]any{}
		n.change(KindPropertiesAdded, "", "properties {} added at the root")
	default:
		_ = pm
		return fmt.Errorf("properties: a JSON %s at the root, not an object", jsonKind(props))
	}
	if req, ok := r["required"]; ok {
		l, isList := req.([]any)
		clean := []any{}
		for _, x := range l {
			if s, ok := x.(string); ok {
				clean = append(clean, s)
			}
		}
		if !isList || len(clean) != len(l) {
			n.change(KindRequiredFixed, "", "required at the root kept to its strings")
			if len(clean) == 0 {
				delete(r, "required")
			} else {
				r["required"] = clean
			}
		}
	}
	return nil
}

// canBeObject reports whether some JSON object can validate against s (as
// far as the root's type, const, enum and combinators tell; a $ref that
// does not resolve locally is given the benefit of the doubt). seen cuts
// $ref cycles.
func canBeObject(s any, defs func(string) (any, bool), seen map[string]bool) bool {
	switch v := s.(type) {
	case bool:
		return v
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			if seen[ref] {
				return true
			}
			t, ok := defs(ref)
			if !ok {
				return true
			}
			seen[ref] = true
			if !canBeObject(t, defs, seen) {
				return false
			}
			delete(seen, ref)
		}
		switch ty := v["type"].(type) {
		case string:
			if ty != "object" {
				return false
			}
		case []any:
			if !slices.Contains(ty, any("object")) {
				return false
			}
		}
		if c, ok := v["const"]; ok {
			if _, isObj := c.(map[string]any); !isObj {
				return false
			}
		}
		if e, ok := v["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { _, isObj := x.(map[string]any); return isObj }) {
			return false
		}
		for _, k := range []string{"anyOf", "oneOf"} {
			// An empty list matches nothing (JSON Schema 2020-12 §10.2.1.2-3).
			if bs, ok := v[k].([]any); ok && !slices.ContainsFunc(bs, func(b any) bool { return canBeObject(b, defs, seen) }) {
				return false
			}
		}
		if bs, ok := v["allOf"].([]any); ok {
			for _, b := range bs {
				if !canBeObject(b, defs, seen) {
					return false
				}
			}
		}
		return true
	}
	return false
}

// dropNonObjectBranches applies what MCP requires of every tools/call,
// that its arguments are an object (docs/decisions/0096-only-object-branches-at-the-root.md):
// root anyOf/oneOf branches and root enum values that can never be an
// object are dropped (a wrapped {"input": "abc"} would be offered but its
// unwrapped call refused), the dropped branches named in the description;
// a root type list keeps only object; a root that no object can match
// leaves the tool out.
func (n *normaliser) dropNonObjectBranches() error {
	r := n.root
	defs := n.resolveLocal
	if tl, ok := r["type"].([]any); ok && !slices.Contains(tl, any("object")) {
		return fmt.Errorf("root type %s: MCP tools/call arguments are always an object, so no call could match", compact(tl))
	}
	if ty, ok := r["type"].(string); ok && ty != "object" {
		return fmt.Errorf("root type %q: MCP tools/call arguments are always an object, so no call could match", ty)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		bs, ok := r[k].([]any)
		if !ok || len(bs) == 0 {
			continue
		}
		var keep, dropped []any
		for _, b := range bs {
			if canBeObject(b, defs, map[string]bool{}) {
				keep = append(keep, b)
			} else {
				dropped = append(dropped, b)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("no branch of the root %s can be an object, and MCP tools/call arguments are always an object", k)
		}
		if len(dropped) == 0 {
			continue
		}
		r[k] = keep
		var what []string
		for _, d := range dropped {
			what = append(what, clip(compact(d), 120))
		}
		n.note("", fmt.Sprintf("Only object arguments can be passed; the root %s alternatives %s were left out.", k, strings.Join(what, ", ")))
		n.change(KindRootBranchDropped, "", "root %s: %d of %d branches can never be an object (MCP arguments are objects) and were dropped: %s", k, len(dropped), len(bs), strings.Join(what, ", "))
		if bm, ok := keep[0].(map[string]any); ok && len(keep) == 1 && len(keysOf(r, "anyOf", "oneOf", "allOf")) == 1 {
			// One alternative left: it is the schema — inlined into the root
			// when their keywords don't overlap, else an allOf of one.
			delete(r, k)
			overlap := bm["$ref"] != nil
			for key := range bm {
				if _, has := r[key]; has && key != "type" {
					overlap = true
				}
			}
			if overlap {
				r["allOf"] = []any{bm}
			} else {
				for key, v := range bm {
					r[key] = v
				}
				if tl, ok := r["type"].([]any); ok && slices.Contains(tl, any("object")) {
					r["type"] = "object"
				}
			}
		}
	}
	if bs, ok := r["allOf"].([]any); ok {
		for _, b := range bs {
			if !canBeObject(b, defs, map[string]bool{}) {
				return fmt.Errorf("a branch of the root allOf (%s) can never be an object, and MCP tools/call arguments are always an object", clip(compact(b), 120))
			}
		}
	}
	if e, ok := r["enum"].([]any); ok {
		var objs []any
		for _, x := range e {
			if _, isObj := x.(map[string]any); isObj {
				objs = append(objs, x)
			}
		}
		if len(objs) == 0 {
			return fmt.Errorf("no value of the root enum is an object, and MCP tools/call arguments are always an object")
		}
		if len(objs) < len(e) {
			r["enum"] = objs
			n.change(KindRootBranchDropped, "", "root enum: %d of %d values are not objects and were dropped", len(e)-len(objs), len(e))
		}
	}
	if c, ok := r["const"]; ok {
		if _, isObj := c.(map[string]any); !isObj {
			return fmt.Errorf("root const %s is not an object, and MCP tools/call arguments are always an object", clip(compact(c), 80))
		}
	}
	return nil
}

func keysOf(m map[string]any, ks ...string) []string {
	var out []string
	for _, k := range ks {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

func refersTo(m map[string]any, ref string) bool {
	found := false
	visit(m, func(x map[string]any) {
		if x["$ref"] == ref {
			found = true
		}
	})
	return found
}

// merge folds root anyOf/oneOf/allOf branches that are plain objects into the
// root object: properties united (a property two branches define differently
// blocks the merge), required = the root's plus, for allOf, every branch's
// and for anyOf/oneOf the ones all branches share; the alternatives are
// stated in the description.
func (n *normaliser) merge(combos []string) bool {
	r := n.root
	props, _ := r["properties"].(map[string]any)
	merged := map[string]any{}
	for k, v := range props {
		merged[k] = v
	}
	required := stringSet(r["required"])
	var notes []string
	for _, k := range combos {
		bs := r[k].([]any)
		var common map[string]bool
		var alts []string
		for i, b := range bs {
			bm := b.(map[string]any)
			if ref, ok := bm["$ref"].(string); ok {
				t, _ := n.resolveLocal(ref)
				tm, _ := t.(map[string]any)
				if tm == nil || len(bm) > 1 {
					return false
				}
				bm = tm
			}
			for key := range bm {
				switch key {
				case "type", "properties", "required", "description", "title", "additionalProperties", "$comment":
				default:
					return false
				}
			}
			bp, _ := bm["properties"].(map[string]any)
			for name, s := range bp {
				if old, ok := merged[name]; ok && compact(old) != compact(s) {
					return false
				}
				merged[name] = s
			}
			br := stringSet(bm["required"])
			if k == "allOf" {
				for x := range br {
					required[x] = true
				}
				continue
			}
			if common == nil {
				common = map[string]bool{}
				for x := range br {
					common[x] = true
				}
			} else {
				for x := range common {
					if !br[x] {
						delete(common, x)
					}
				}
			}
			label := fmt.Sprintf("(%d)", i+1)
			if d, _ := bm["description"].(string); d != "" {
				label += " " + d + ";"
			}
			names := sortedKeys(br)
			if len(names) > 0 {
				label += " requires " + strings.Join(names, ", ")
			} else if len(bp) > 0 {
				label += " with " + strings.Join(sortedKeys(bp), ", ")
			} else {
				label += " any of the arguments"
			}
			alts = append(alts, label)
		}
		for x := range common {
			required[x] = true
		}
		if k != "allOf" {
			word := "one or more"
			if k == "oneOf" {
				word = "exactly one"
			}
			notes = append(notes, fmt.Sprintf("Arguments must match %s of: %s.", word, strings.Join(alts, "; ")))
		}
	}
	for _, k := range combos {
		delete(r, k)
	}
	r["type"] = "object"
	r["properties"] = merged
	if len(required) > 0 {
		r["required"] = toAnyList(sortedKeys(required))
	} else {
		delete(r, "required")
	}
	for _, t := range notes {
		n.note("", t)
	}
	n.change(KindRootUnionMerged, "", "root %s merged into one object", strings.Join(combos, "/"))
	return true
}

func (n *normaliser) wrap(why string) { n.wrapKind(KindRootUnionWrapped, why) }

// wrapKind moves the root schema into the single property "input" of a new
// root object; $defs/definitions stay at the root, and local pointers into
// the moved schema are rewritten.
func (n *normaliser) wrapKind(k Kind, why string) {
	old := n.root
	// MCP arguments are objects: the wrapped value is one too, so a branch
	// that accepts anything ({} or no type) does not offer "abc"
	// (docs/decisions/0096-only-object-branches-at-the-root.md).
	if _, typed := old["type"]; !typed && !objectish(old, n.resolveLocal) {
		old["type"] = "object"
	}
	root := map[string]any{"type": "object"}
	for _, d := range []string{"$defs", "definitions", "$schema", "$id"} {
		if v, ok := old[d]; ok {
			root[d] = v
			delete(old, d)
		}
	}
	visit(old, func(m map[string]any) {
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") || isDefsRef(ref) {
			return
		}
		m["$ref"] = "#/properties/" + wrapKey + strings.TrimPrefix(ref, "#")
	})
	root["properties"] = map[string]any{wrapKey: old}
	root["required"] = []any{wrapKey}
	n.root = root
	n.args.unwrap = wrapKey
	n.change(k, "", "%s: wrapped into the object property %q", why, wrapKey)
}

func isDefsRef(ref string) bool {
	return strings.HasPrefix(ref, "#/$defs/") || strings.HasPrefix(ref, "#/definitions/")
}

// ---- $ref ----

// resolveRefs inlines every $ref the profile cannot take: all of them when
// the profile has no $ref support, else the ones that do not point into the
// root's $defs/definitions. Cycles are cut at the second visit of a
// reference with a described fallback; unresolvable references are dropped
// with a note.
func (n *normaliser) resolveRefs() error {
	var err error
	var expand func(v any, path string, stack []string) any
	expand = func(v any, path string, stack []string) any {
		if err != nil {
			return v
		}
		n.nodes++
		if n.nodes > 200000 {
			err = fmt.Errorf("schema grows beyond 200,000 nodes when its $refs are inlined")
			return v
		}
		switch x := v.(type) {
		case []any:
			for i := range x {
				x[i] = expand(x[i], fmt.Sprintf("%s/%d", path, i), stack)
			}
			return x
		case map[string]any:
			ref, isRef := x["$ref"].(string)
			if isRef && !(n.p.Refs && isDefsRef(ref) && lookupPointer(n.root, strings.TrimPrefix(ref, "#")) != nil) {
				target, ok := n.resolveLocal(ref)
				if !ok {
					delete(x, "$ref")
					n.change(KindRefUnresolved, path, "$ref %s could not be resolved: dropped", ref)
					n.note(path, fmt.Sprintf("(Refers to %s, not available here.)", clip(ref, 200)))
				} else if contains(stack, ref) {
					delete(x, "$ref")
					fb := cycleFallback(target, ref)
					for k, v := range fb {
						if _, has := x[k]; !has {
							x[k] = v
						}
					}
					n.change(KindRefCycleCut, path, "recursive $ref %s cut", ref)
					return x
				} else {
					delete(x, "$ref")
					inl := deepCopy(target)
					if tm, ok := inl.(map[string]any); ok {
						for k, v := range x {
							tm[k] = v // siblings of $ref apply too (2020-12)
						}
						n.change(KindRefInlined, path, "$ref %s inlined", ref)
						return expand(tm, path, append(stack, ref))
					}
					if b, ok := inl.(bool); ok && b && len(x) == 0 {
						return map[string]any{}
					}
					n.change(KindRefUnresolved, path, "$ref %s is not a schema object: dropped", ref)
				}
			}
			for _, k := range sortedKeys(x) {
				if k == "$defs" || k == "definitions" {
					continue
				}
				if k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example" {
					continue
				}
				x[k] = expand(x[k], path+"/"+escapePointer(k), stack)
			}
			return x
		}
		return v
	}
	defs := map[string]any{}
	for _, d := range []string{"$defs", "definitions"} {
		if v, ok := n.root[d]; ok {
			defs[d] = v
		}
	}
	expand(n.root, "", nil)
	if err != nil {
		return err
	}
	if n.p.Refs {
		// Expand inside the definitions that remain referenced.
		for _, d := range []string{"$defs", "definitions"} {
			dm, ok := n.root[d].(map[string]any)
			if !ok {
				continue
			}
			for _, name := range sortedKeys(dm) {
				ref := "#/" + d + "/" + escapePointer(name)
				dm[name] = expand(dm[name], "/"+d+"/"+escapePointer(name), []string{ref})
			}
		}
		if err != nil {
			return err
		}
		n.pruneDefs()
		return nil
	}
	for d := range defs {
		delete(n.root, d)
		n.change(KindKeywordDropped, "", "%s removed after inlining", d)
	}
	return nil
}

// dropDangling removes local $refs that resolve nowhere in the document
// (the mcp profile keeps every other $ref as it is).
func (n *normaliser) dropDangling() {
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#") && lookupPointer(n.root, strings.TrimPrefix(ref, "#")) == nil {
				delete(x, "$ref")
				n.note(path, fmt.Sprintf("(Refers to %s, not available here.)", clip(ref, 200)))
				n.change(KindRefUnresolved, path, "$ref %s could not be resolved: dropped", ref)
			}
			for _, k := range sortedKeys(x) {
				if k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example" {
					continue
				}
				walk(x[k], path+"/"+escapePointer(k))
			}
		case []any:
			for i := range x {
				walk(x[i], fmt.Sprintf("%s/%d", path, i))
			}
		}
	}
	walk(n.root, "")
}

// pruneDefs removes definitions no kept $ref points to.
func (n *normaliser) pruneDefs() {
	used := map[string]bool{}
	var mark func(v any)
	mark = func(v any) {
		visitAny(v, func(m map[string]any) {
			ref, ok := m["$ref"].(string)
			if !ok || used[ref] {
				return
			}
			used[ref] = true
			if t, ok := n.resolveLocal(ref); ok {
				mark(t)
			}
		}, true)
	}
	mark(withoutDefs(n.root))
	for _, d := range []string{"$defs", "definitions"} {
		dm, ok := n.root[d].(map[string]any)
		if !ok {
			if _, has := n.root[d]; has {
				delete(n.root, d)
			}
			continue
		}
		for name := range dm {
			if !used["#/"+d+"/"+escapePointer(name)] {
				delete(dm, name)
			}
		}
		if len(dm) == 0 {
			delete(n.root, d)
		}
	}
}

func withoutDefs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "$defs" && k != "definitions" {
			out[k] = v
		}
	}
	return out
}

// cycleFallback is what replaces a recursive $ref: the target's type (when
// it has one) and a description naming the recursion.
func cycleFallback(target any, ref string) map[string]any {
	fb := map[string]any{}
	name := ref[strings.LastIndex(ref, "/")+1:]
	if name == "#" || name == "" {
		name = "the arguments"
	}
	if tm, ok := target.(map[string]any); ok {
		if t, ok := tm["type"].(string); ok {
			fb["type"] = t
		}
	}
	fb["description"] = fmt.Sprintf("Recursive: a value of the same shape as %s (not expanded further).", name)
	return fb
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// ---- sub-schemas ----

// annotations are dropped without a note: they constrain nothing.
var annotations = set("$schema", "$id", "$comment", "$anchor", "$vocabulary", "$dynamicAnchor",
	"examples", "deprecated", "readOnly", "writeOnly", "title", "contentMediaType", "contentEncoding",
	"markdownDescription", "errorMessage")

// sanitize drops what no JSON Schema reader accepts: a type that is not a
// type name (or list of them), an empty enum.
func (n *normaliser) sanitize(s map[string]any, path string) {
	if t, ok := s["type"]; ok {
		valid := false
		switch x := t.(type) {
		case string:
			valid = jsonTypes[x]
		case []any:
			valid = len(x) > 0
			for _, y := range x {
				if ys, ok := y.(string); !ok || !jsonTypes[ys] {
					valid = false
				}
			}
		}
		if !valid {
			delete(s, "type")
			n.note(path, fmt.Sprintf("(Type: %s.)", clip(compact(t), 300)))
			n.change(KindKeywordDropped, path, "type %s is not a schema type: moved into the description", clip(compact(t), 100))
		}
	}
	if e, ok := s["enum"].([]any); ok && len(e) == 0 {
		delete(s, "enum")
		n.change(KindKeywordDropped, path, "empty enum dropped")
	}
}

// walk applies the profile's sub-schema rules to node s at path.
func (n *normaliser) walk(s map[string]any, path string, am *argMap, isRoot bool) {
	p := n.p
	n.sanitize(s, path)
	// Children first, so notes on a child stay on the child.
	if props, ok := s["properties"].(map[string]any); ok {
		n.walkProperties(s, props, path, am)
	}
	for _, k := range []string{"items", "additionalProperties", "not", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "if", "then", "else"} {
		switch c := s[k].(type) {
		case map[string]any:
			var child *argMap
			if k == "items" {
				if am.items == nil {
					am.items = &argMap{}
				}
				child = am.items
			} else {
				child = &argMap{}
			}
			n.walk(c, path+"/"+k, child, false)
		case []any:
			if k == "items" {
				n.tupleItems(s, c, path, am)
			}
		case bool:
			if k == "items" {
				if c {
					s[k] = map[string]any{}
				} else {
					delete(s, k)
					n.note(path, "(No items allowed.)")
				}
				n.change(KindBooleanSchema, path+"/items", "items %v replaced", c)
			}
		}
	}
	if pi, ok := s["prefixItems"].([]any); ok && p.ID != MCP {
		if _, has := s["items"]; !has || p.Keywords != nil {
			delete(s, "prefixItems")
			n.tupleItems(s, pi, path, am)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		bs, ok := s[k].([]any)
		if !ok {
			continue
		}
		for i, b := range bs {
			switch bm := b.(type) {
			case map[string]any:
				n.walk(bm, fmt.Sprintf("%s/%s/%d", path, k, i), am, false)
			case bool:
				bs[i] = map[string]any{}
				if !bm {
					bs[i] = map[string]any{"not": map[string]any{}}
				}
			}
		}
	}
	for _, d := range []string{"$defs", "definitions", "patternProperties", "dependentSchemas"} {
		if dm, ok := s[d].(map[string]any); ok {
			for _, name := range sortedKeys(dm) {
				if cm, ok := dm[name].(map[string]any); ok {
					n.walk(cm, path+"/"+d+"/"+escapePointer(name), &argMap{}, false)
				}
			}
		}
	}
	if p.SingleType {
		n.singleType(s, path)
	}
	if p.StringEnumsOnly {
		n.stringEnums(s, path)
	}
	if p.Keywords != nil {
		n.whitelist(s, path, p.Keywords, isRoot, am)
	}
	if p.ArrayNeedsItems && hasType(s, "array") {
		if _, ok := s["items"]; !ok {
			s["items"] = map[string]any{}
			n.change(KindItemsAdded, path, "items {} added to an array")
		}
	}
	if p.ObjectNeedsProperties && !isRoot && hasType(s, "object") {
		if props, _ := s["properties"].(map[string]any); len(props) == 0 {
			n.objectAsText(s, path, am)
		}
	}
	if p.PropertyNamePattern != nil || p.Strict {
		n.fixRequired(s, path)
	}
}

func (n *normaliser) walkProperties(s, props map[string]any, path string, am *argMap) {
	names := sortedKeys(props)
	var renames map[string]string
	if pat := n.p.PropertyNamePattern; pat != nil {
		taken := map[string]bool{}
		for _, name := range names {
			if pat.MatchString(name) {
				taken[name] = true
			}
		}
		for _, name := range names {
			if pat.MatchString(name) {
				continue
			}
			nn := propertyName(name, taken)
			taken[nn] = true
			if renames == nil {
				renames = map[string]string{}
			}
			renames[name] = nn
		}
	}
	for _, name := range names {
		v := props[name]
		bound := name
		if nn, ok := renames[name]; ok {
			bound = nn
			delete(props, name)
			props[nn] = v
			if am.rename == nil {
				am.rename = map[string]string{}
			}
			am.rename[nn] = name
			n.change(KindPropertyRenamed, path+"/properties/"+escapePointer(name), "property %q bound as %q", name, nn)
		}
		if am.props == nil {
			am.props = map[string]*argMap{}
		}
		child := am.props[bound]
		if child == nil {
			child = &argMap{}
			am.props[bound] = child
		}
		cpath := path + "/properties/" + escapePointer(bound)
		switch c := v.(type) {
		case map[string]any:
			if bound != name {
				d, _ := c["description"].(string)
				c["description"] = joinText(d, fmt.Sprintf("(Argument %q.)", name))
			}
			n.walk(c, cpath, child, false)
		case bool:
			if c {
				props[bound] = map[string]any{}
				n.change(KindBooleanSchema, cpath, "property schema true replaced by {}")
				n.walk(props[bound].(map[string]any), cpath, child, false)
			} else {
				delete(props, bound)
				n.change(KindBooleanSchema, cpath, "property schema false: property removed")
				n.note(path, fmt.Sprintf("(Argument %q must not be given.)", name))
			}
		default:
			props[bound] = map[string]any{}
			n.change(KindBooleanSchema, cpath, "property schema of JSON %s replaced by {}", jsonKind(v))
		}
	}
	if renames != nil {
		if req, ok := s["required"].([]any); ok {
			for i, r := range req {
				if rs, ok := r.(string); ok {
					if nn, ok := renames[rs]; ok {
						req[i] = nn
					}
				}
			}
		}
		if po, ok := s["propertyOrdering"].([]any); ok {
			for i, r := range po {
				if rs, ok := r.(string); ok {
					if nn, ok := renames[rs]; ok {
						po[i] = nn
					}
				}
			}
		}
	}
}

// propertyName maps name onto Gemini's property-name pattern, unique among taken.
func propertyName(name string, taken map[string]bool) string {
	var sb strings.Builder
	for i, r := range name {
		okStart := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		ok := okStart || r >= '0' && r <= '9'
		if i == 0 && !okStart {
			sb.WriteByte('_')
			if !ok {
				continue
			}
		}
		if ok && r < utf8.RuneSelf {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	base := sb.String()
	if len(base) > 60 {
		base = base[:60]
	}
	out := base
	for i := 2; taken[out]; i++ {
		out = fmt.Sprintf("%s_%d", base, i)
	}
	return out
}

func (n *normaliser) tupleItems(s map[string]any, items []any, path string, am *argMap) {
	var bs []any
	var descr []string
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		n.walk(m, fmt.Sprintf("%s/items/%d", path, i), &argMap{}, false)
		bs = append(bs, m)
		descr = append(descr, fmt.Sprintf("%d: %s", i, clip(compact(m), 200)))
	}
	switch len(bs) {
	case 0:
		s["items"] = map[string]any{}
	case 1:
		s["items"] = bs[0]
	default:
		s["items"] = map[string]any{"anyOf": bs}
	}
	n.note(path, fmt.Sprintf("(Positional items: %s.)", strings.Join(descr, "; ")))
	n.change(KindTupleItems, path, "positional items merged into one items schema")
}

// singleType rewrites a type list into one type plus nullable, or anyOf.
func (n *normaliser) singleType(s map[string]any, path string) {
	switch t := s["type"].(type) {
	case []any:
		var nonNull []any
		null := false
		for _, x := range t {
			if x == "null" {
				null = true
			} else {
				nonNull = append(nonNull, x)
			}
		}
		switch len(nonNull) {
		case 0:
			delete(s, "type")
		case 1:
			s["type"] = nonNull[0]
		default:
			delete(s, "type")
			var bs []any
			for _, x := range nonNull {
				b := map[string]any{"type": x}
				for _, k := range typeKeywords[x.(string)] {
					if v, ok := s[k]; ok {
						b[k] = v
					}
				}
				if x == "array" && n.p.ArrayNeedsItems && b["items"] == nil {
					b["items"] = map[string]any{}
				}
				bs = append(bs, b)
			}
			for _, x := range nonNull {
				for _, k := range typeKeywords[x.(string)] {
					delete(s, k)
				}
			}
			if old, ok := s["anyOf"].([]any); ok {
				s["allOf"] = []any{map[string]any{"anyOf": old}, map[string]any{"anyOf": bs}}
				delete(s, "anyOf")
			} else {
				s["anyOf"] = bs
			}
		}
		if null {
			s["nullable"] = true
		}
		n.change(KindTypeListSplit, path, "type %s rewritten as one type", compact(t))
	case string:
		if t == "null" {
			delete(s, "type")
			s["nullable"] = true
			n.change(KindTypeListSplit, path, "type null rewritten as nullable")
		}
	}
	// anyOf [{type: null}, X] → X with nullable.
	if bs, ok := s["anyOf"].([]any); ok {
		var keep []any
		null := false
		for _, b := range bs {
			if bm, ok := b.(map[string]any); ok && len(bm) == 1 && bm["type"] == "null" {
				null = true
				continue
			}
			keep = append(keep, b)
		}
		if null {
			s["nullable"] = true
			if len(keep) == 1 {
				delete(s, "anyOf")
				if km, ok := keep[0].(map[string]any); ok {
					for k, v := range km {
						if _, has := s[k]; !has {
							s[k] = v
						}
					}
				}
			} else {
				s["anyOf"] = keep
			}
			n.change(KindNullableTypeRewrite, path, "null branch of anyOf rewritten as nullable")
		}
	}
}

// typeKeywords are the keywords that apply to one type only.
var typeKeywords = map[string][]string{
	"array":   {"items", "minItems", "maxItems", "uniqueItems"},
	"object":  {"properties", "required", "minProperties", "maxProperties", "propertyOrdering"},
	"string":  {"minLength", "maxLength", "pattern", "format"},
	"number":  {"minimum", "maximum"},
	"integer": {"minimum", "maximum"},
}

// stringEnums keeps string enums only; other enums move into the description.
func (n *normaliser) stringEnums(s map[string]any, path string) {
	if c, ok := s["const"]; ok {
		if cs, ok := c.(string); ok {
			s["enum"] = []any{cs}
			if s["type"] == nil {
				s["type"] = "string"
			}
			delete(s, "const")
			n.change(KindKeywordRenamed, path, "const rewritten as a one-value enum")
		}
	}
	e, ok := s["enum"].([]any)
	if !ok {
		if _, has := s["enum"]; has {
			delete(s, "enum")
			n.change(KindKeywordDropped, path, "enum that is not a list dropped")
		}
		return
	}
	var strs []any
	null, other := false, false
	for _, v := range e {
		switch x := v.(type) {
		case string:
			strs = append(strs, x)
		case nil:
			null = true
		default:
			other = true
		}
	}
	if !other && len(strs) > 0 {
		s["enum"] = strs
		if null {
			s["nullable"] = true
		}
		if t, _ := s["type"].(string); t != "string" {
			s["type"] = "string"
		}
		if null {
			n.change(KindNullableTypeRewrite, path, "null in enum rewritten as nullable")
		}
		return
	}
	delete(s, "enum")
	var vals []string
	for _, v := range e {
		vals = append(vals, compact(v))
	}
	n.note(path, fmt.Sprintf("(One of: %s.)", clip(strings.Join(vals, ", "), 2000)))
	n.change(KindEnumMoved, path, "enum of non-string values moved into the description")
}

// whitelist drops keywords outside keep, moving constraints into the description.
func (n *normaliser) whitelist(s map[string]any, path string, keep map[string]bool, isRoot bool, am *argMap) {
	if _, ok := s["oneOf"]; ok && keep["anyOf"] && !keep["oneOf"] {
		bs := s["oneOf"]
		delete(s, "oneOf")
		if old, ok := s["anyOf"].([]any); ok {
			n.note(path, fmt.Sprintf("(Also one of: %s.)", clip(compact(bs), 600)))
			s["anyOf"] = old
		} else {
			s["anyOf"] = bs
			n.note(path, "(Exactly one of the alternatives.)")
		}
		n.change(KindKeywordRenamed, path, "oneOf rewritten as anyOf")
	}
	if all, ok := s["allOf"].([]any); ok && !keep["allOf"] {
		delete(s, "allOf")
		for _, b := range all {
			bm, ok := b.(map[string]any)
			if !ok {
				continue
			}
			for k, v := range bm {
				if _, has := s[k]; !has {
					s[k] = v
				} else if k == "properties" {
					sp, _ := s[k].(map[string]any)
					bp, _ := v.(map[string]any)
					for pk, pv := range bp {
						if _, has := sp[pk]; !has && sp != nil {
							sp[pk] = pv
						}
					}
				} else if k == "required" {
					s[k] = toAnyList(sortedKeys(union(stringSet(s[k]), stringSet(v))))
				} else if compact(s[k]) != compact(v) {
					n.note(path, fmt.Sprintf("(Also %s: %s.)", k, clip(compact(v), 300)))
				}
			}
		}
		n.change(KindKeywordRenamed, path, "allOf merged into the schema")
	}
	for _, k := range sortedKeys(s) {
		if keep[k] {
			continue
		}
		v := s[k]
		delete(s, k)
		switch {
		case annotations[k] || k == "additionalProperties" && isBool(v) || k == "$defs" || k == "definitions":
			n.change(KindKeywordDropped, path, "%s dropped", k)
		default:
			n.note(path, fmt.Sprintf("(%s: %s.)", k, clip(compact(v), 300)))
			n.change(KindKeywordDropped, path, "%s dropped, constraint moved into the description", k)
		}
	}
	if f, ok := s["format"].(string); ok && n.p.ID == Gemini {
		// Gemini's Schema.format: "for NUMBER type: float, double; for
		// INTEGER type: int32, int64; for STRING type: enum, date-time".
		okf := false
		switch s["type"] {
		case "number":
			okf = f == "float" || f == "double"
		case "integer":
			okf = f == "int32" || f == "int64"
		case "string":
			okf = f == "enum" || f == "date-time"
		}
		if !okf {
			delete(s, "format")
			n.note(path, fmt.Sprintf("(Format: %s.)", clip(f, 100)))
			n.change(KindKeywordDropped, path, "format %q dropped, moved into the description", f)
		}
	}
}

func union(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func isBool(v any) bool { _, ok := v.(bool); return ok }

// objectAsText carries a free-form object as a JSON text (Gemini cannot
// declare an object without properties); MapArguments decodes it.
func (n *normaliser) objectAsText(s map[string]any, path string, am *argMap) {
	note := "A JSON object, given as its JSON text."
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		note += " Values: " + clip(compact(ap), 300) + "."
	}
	for k := range s {
		if k != "description" && k != "nullable" {
			delete(s, k)
		}
	}
	s["type"] = "string"
	d, _ := s["description"].(string)
	s["description"] = joinText(d, note)
	am.jsonText = true
	am.props = nil
	n.change(KindObjectAsJSONText, path, "object without properties carried as JSON text")
}

func (n *normaliser) fixRequired(s map[string]any, path string) {
	req, ok := s["required"].([]any)
	if !ok {
		if _, has := s["required"]; has {
			delete(s, "required")
			n.change(KindRequiredFixed, path, "required that is not a list dropped")
		}
		return
	}
	props, _ := s["properties"].(map[string]any)
	var keep []any
	for _, r := range req {
		rs, ok := r.(string)
		if !ok {
			continue
		}
		if _, defined := props[rs]; defined {
			keep = append(keep, rs)
		}
	}
	if len(keep) != len(req) {
		n.change(KindRequiredFixed, path, "required kept to the defined properties")
	}
	if len(keep) == 0 {
		delete(s, "required")
	} else {
		s["required"] = keep
	}
}

func hasType(s map[string]any, t string) bool {
	switch x := s["type"].(type) {
	case string:
		return x == t
	case []any:
		for _, y := range x {
			if y == t {
				return true
			}
		}
	}
	return false
}
