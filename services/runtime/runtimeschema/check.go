package runtimeschema

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Check validates a rendered tool (Render's form) against the profile's
// rules as the provider documents them, and returns the violations (nil =
// valid). It is written independently of the normaliser: it shares only
// the profile tables and the JSON helpers, so a normaliser bug shows up as
// a violation here.
func Check(id ID, tool map[string]any) []string {
	p, ok := profiles[id]
	if !ok {
		return []string{fmt.Sprintf("unknown profile %q", id)}
	}
	c := &checker{p: p}
	c.tool(tool)
	return c.errs
}

type checker struct {
	p      *Profile
	errs   []string
	root   map[string]any
	strict bool

	properties, enumValues, stringChars int
}

func (c *checker) fail(format string, a ...any) { c.errs = append(c.errs, fmt.Sprintf(format, a...)) }

func (c *checker) tool(t map[string]any) {
	var fn map[string]any
	schemaKey := map[ID]string{OpenAIChat: "parameters", OpenAIResponses: "parameters",
		AnthropicMessages: "input_schema", Gemini: "parameters", MCP: "inputSchema"}[c.p.ID]
	switch c.p.ID {
	case OpenAIChat:
		if t["type"] != "function" {
			c.fail("type: must be \"function\"")
		}
		fn, _ = t["function"].(map[string]any)
		if fn == nil {
			c.fail("function: must be an object")
			return
		}
	case OpenAIResponses:
		if t["type"] != "function" {
			c.fail("type: must be \"function\"")
		}
		fn = t
	default:
		fn = t
	}
	name, _ := fn["name"].(string)
	if !c.p.NamePattern.MatchString(name) {
		c.fail("name %q: does not match %s", name, c.p.NamePattern)
	}
	if c.p.NameMax > 0 && len(name) > c.p.NameMax {
		c.fail("name: longer than %d", c.p.NameMax)
	}
	if d, ok := fn["description"]; ok {
		ds, isStr := d.(string)
		if !isStr {
			c.fail("description: must be a string")
		} else if c.p.DescriptionMax > 0 && utf8.RuneCountInString(ds) > c.p.DescriptionMax {
			c.fail("description: longer than %d characters", c.p.DescriptionMax)
		}
	}
	if c.p.ID == OpenAIChat || c.p.ID == OpenAIResponses {
		s, ok := fn["strict"].(bool)
		if !ok {
			c.fail("strict: must be sent as a boolean (the Responses API defaults it to true)")
		}
		c.strict = s
	}
	raw, present := fn[schemaKey]
	if !present && c.p.ID == Gemini {
		return // "For function with no parameters, this can be left unset."
	}
	root, ok := raw.(map[string]any)
	if !ok {
		c.fail("%s: must be a JSON object", schemaKey)
		return
	}
	c.root = root
	c.rootRules(root)
	if c.p.RootOnly {
		return
	}
	c.node(root, "", 1, true)
	for _, d := range []string{"$defs", "definitions"} {
		dm, ok := root[d].(map[string]any)
		if _, has := root[d]; has && !ok {
			c.fail("%s: must be an object", d)
		}
		for _, k := range sortedKeys(dm) {
			sm, ok := dm[k].(map[string]any)
			if !ok {
				c.fail("%s/%s: must be a schema object", d, k)
				continue
			}
			c.stringChars += len(k)
			c.node(sm, "/"+d+"/"+k, 1, false)
		}
	}
	if c.strict {
		if c.properties > strictMaxProperties {
			c.fail("strict: %d object properties, limit %d", c.properties, strictMaxProperties)
		}
		if c.enumValues > strictMaxEnumValues {
			c.fail("strict: %d enum values, limit %d", c.enumValues, strictMaxEnumValues)
		}
		if c.stringChars > strictMaxStringChars {
			c.fail("strict: %d characters of names and values, limit %d", c.stringChars, strictMaxStringChars)
		}
	}
}

// rootRules: the parameters are an object schema with properties (MCP:
// `type: "object"`; OpenAI: "a JSON Schema object", root "must be an object"
// and "not anyOf"; Anthropic: input_schema type "object", no oneOf/allOf/
// anyOf at the top level; Gemini: parameters of type OBJECT).
func (c *checker) rootRules(root map[string]any) {
	if root["type"] != "object" {
		c.fail("root: type must be \"object\", got %s", compact(root["type"]))
	}
	if pm, ok := root["properties"].(map[string]any); !ok {
		c.fail("root: properties must be present and an object")
	} else if c.p.ObjectNeedsProperties && len(pm) == 0 {
		c.fail("root: properties must be non-empty for OBJECT type (leave parameters unset instead)")
	}
	for _, k := range c.p.RootForbidden {
		if _, ok := root[k]; ok {
			c.fail("root: %s is not allowed at the top level", k)
		}
	}
	if r, ok := root["required"]; ok {
		if !stringList(r) {
			c.fail("root: required must be a list of strings")
		}
	}
	if c.p.RootOnly {
		// $refs must still resolve in the document (2020-12 local refs).
		visit(root, func(m map[string]any) {
			if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
				if lookupPointer(root, strings.TrimPrefix(ref, "#")) == nil {
					c.fail("$ref %s does not resolve", ref)
				}
			}
		})
	}
}

var jsonTypes = set("string", "number", "integer", "boolean", "object", "array", "null")

func (c *checker) node(s map[string]any, path string, depth int, isRoot bool) {
	p := c.p
	at := pathOr(path)
	if c.strict && depth > strictMaxDepth+1 {
		c.fail("strict: %s nested deeper than %d levels", at, strictMaxDepth)
	}
	if p.Keywords != nil {
		for k := range s {
			if !p.Keywords[k] {
				c.fail("%s: keyword %s is not part of the profile's schema subset", at, k)
			}
		}
	}
	if c.strict {
		for k := range s {
			if !strictKeywords[k] {
				c.fail("strict: %s: keyword %s is not supported", at, k)
			}
		}
		if f, ok := s["format"].(string); ok && !strictFormats[f] {
			c.fail("strict: %s: format %q is not supported", at, f)
		}
	}
	var types []string
	switch t := s["type"].(type) {
	case nil:
	case string:
		types = []string{t}
	case []any:
		if p.SingleType {
			c.fail("%s: type must be a single type name", at)
		}
		if len(t) == 0 {
			c.fail("%s: type list is empty", at)
		}
		for _, x := range t {
			xs, _ := x.(string)
			types = append(types, xs)
		}
	default:
		c.fail("%s: type must be a string or a list of strings", at)
	}
	for _, t := range types {
		if !jsonTypes[t] || p.SingleType && t == "null" {
			c.fail("%s: type %q is not a schema type", at, t)
		}
	}
	has := func(t string) bool {
		for _, x := range types {
			if x == t {
				return true
			}
		}
		return false
	}
	if ref, ok := s["$ref"]; ok {
		rs, _ := ref.(string)
		switch {
		case !p.Refs:
			c.fail("%s: $ref is not supported by the profile", at)
		case !isDefsRef(rs) || lookupPointer(c.root, strings.TrimPrefix(rs, "#")) == nil:
			c.fail("%s: $ref %q must point into the root's $defs or definitions", at, rs)
		}
	}
	if !p.Refs {
		for _, k := range []string{"$defs", "definitions"} {
			if _, ok := s[k]; ok {
				c.fail("%s: %s is not supported by the profile", at, k)
			}
		}
	}
	if c.strict {
		_, hasRef := s["$ref"]
		_, hasAny := s["anyOf"]
		_, hasEnum := s["enum"]
		_, hasConst := s["const"]
		if len(types) == 0 && !hasRef && !hasAny && !hasEnum && !hasConst {
			c.fail("strict: %s: every schema needs a type", at)
		}
	}
	if pv, ok := s["properties"]; ok {
		pm, isMap := pv.(map[string]any)
		if !isMap {
			c.fail("%s: properties must be an object", at)
		}
		names := make([]string, 0, len(pm))
		for k := range pm {
			names = append(names, k)
		}
		sort.Strings(names)
		c.properties += len(names)
		for _, k := range names {
			c.stringChars += len(k)
			if p.PropertyNamePattern != nil && !p.PropertyNamePattern.MatchString(k) {
				c.fail("%s: property name %q does not match %s", at, k, p.PropertyNamePattern)
			}
			cm, ok := pm[k].(map[string]any)
			if !ok {
				if _, isBool := pm[k].(bool); isBool && p.Keywords == nil && !c.strict && p.ID == AnthropicMessages {
					continue
				}
				c.fail("%s/properties/%s: must be a schema object", path, k)
				continue
			}
			c.node(cm, path+"/properties/"+k, depth+1, false)
		}
		if c.strict && has("object") {
			if s["additionalProperties"] != false {
				c.fail("strict: %s: additionalProperties must be false", at)
			}
			req := stringSetOf(s["required"])
			if len(req) != len(names) {
				c.fail("strict: %s: every property must be required", at)
			} else {
				for _, k := range names {
					if !req[k] {
						c.fail("strict: %s: property %s must be required", at, k)
					}
				}
			}
		}
	} else if c.strict && has("object") {
		c.fail("strict: %s: an object needs properties", at)
	}
	if r, ok := s["required"]; ok && !stringList(r) {
		c.fail("%s: required must be a list of strings", at)
	}
	if p.ID == Gemini {
		if pm, _ := s["properties"].(map[string]any); has("object") && len(pm) == 0 && !isRoot {
			c.fail("%s: properties should be non-empty for OBJECT type", at)
		}
		if r, ok := s["required"].([]any); ok {
			pm, _ := s["properties"].(map[string]any)
			for _, x := range r {
				if xs, _ := x.(string); pm[xs] == nil {
					c.fail("%s: required %q is not a property", at, xs)
				}
			}
		}
		if nv, ok := s["nullable"]; ok {
			if _, isBool := nv.(bool); !isBool {
				c.fail("%s: nullable must be a boolean", at)
			}
		}
	}
	if it, ok := s["items"]; ok {
		switch im := it.(type) {
		case map[string]any:
			c.node(im, path+"/items", depth+1, false)
		default:
			c.fail("%s: items must be a schema object", at)
		}
	} else if p.ArrayNeedsItems && has("array") {
		c.fail("%s: array schema missing items", at)
	}
	if e, ok := s["enum"]; ok {
		l, isList := e.([]any)
		if !isList || len(l) == 0 {
			c.fail("%s: enum must be a non-empty list", at)
		}
		c.enumValues += len(l)
		for _, v := range l {
			if sv, ok := v.(string); ok {
				c.stringChars += utf8.RuneCountInString(sv)
			} else if p.StringEnumsOnly {
				c.fail("%s: enum values must be strings", at)
			}
		}
		if p.StringEnumsOnly && !has("string") {
			c.fail("%s: enum is allowed on type string only", at)
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		v, ok := s[k]
		if !ok {
			continue
		}
		l, isList := v.([]any)
		if !isList || len(l) == 0 {
			c.fail("%s: %s must be a non-empty list", at, k)
			continue
		}
		if c.strict && k != "anyOf" {
			c.fail("strict: %s: %s is not supported", at, k)
		}
		for i, b := range l {
			bm, ok := b.(map[string]any)
			if !ok {
				c.fail("%s/%s/%d: must be a schema object", path, k, i)
				continue
			}
			c.node(bm, fmt.Sprintf("%s/%s/%d", path, k, i), depth, false)
		}
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		c.node(ap, path+"/additionalProperties", depth+1, false)
	}
}

func stringList(v any) bool {
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, x := range l {
		if _, ok := x.(string); !ok {
			return false
		}
	}
	return true
}

func stringSetOf(v any) map[string]bool { return stringSet(v) }
