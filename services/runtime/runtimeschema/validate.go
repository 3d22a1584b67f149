package runtimeschema

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ArgumentError is a call's arguments failing the input schema the model
// saw: the JSON pointer of the first failing value (in the arguments as
// the model sent them) and why (docs/decisions/0093-arguments-checked-against-the-bound-schema.md).
type ArgumentError struct {
	// Pointer is the JSON pointer of the failing value ("" = the whole object).
	Pointer string
	// Reason says what the schema wanted.
	Reason string
}

func (e *ArgumentError) Error() string {
	p := e.Pointer
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("at %s: %s", p, e.Reason)
}

// The compiled-schema cache is bounded by entries and by the bytes of the
// schemas' JSON text (a compiled schema is a small multiple of it); it is
// emptied when full — schemas are few and stable per catalog hash.
const (
	maxCompiled      = 2048
	maxCompiledBytes = 32 << 20
)

var compiled = struct {
	sync.Mutex
	m map[[32]byte]*jsonschema.Schema
	// bad remembers schemas that do not compile (not validated).
	bad   map[[32]byte]bool
	bytes int
}{m: map[[32]byte]*jsonschema.Schema{}, bad: map[[32]byte]bool{}}

// noLoader refuses every external $ref: validation never reaches the
// network or the file system.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %s is not loaded", url)
}

// schemaFor compiles (or returns from the cache) the JSON Schema of params;
// nil when it does not compile (an unresolvable $ref, an unknown $schema
// dialect): such a schema is not checked here, the MCP server still is.
func schemaFor(params map[string]any) *jsonschema.Schema {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil
	}
	key := sha256.Sum256(raw)
	compiled.Lock()
	if s, ok := compiled.m[key]; ok || compiled.bad[key] {
		compiled.Unlock()
		return s
	}
	compiled.Unlock()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	var s *jsonschema.Schema
	if err == nil {
		c := jsonschema.NewCompiler()
		c.UseLoader(noLoader{})
		if err = c.AddResource("mem:///bound.json", doc); err == nil {
			s, err = c.Compile("mem:///bound.json")
		}
	}
	compiled.Lock()
	defer compiled.Unlock()
	if len(compiled.m)+len(compiled.bad) >= maxCompiled || compiled.bytes+len(raw) > maxCompiledBytes {
		compiled.m, compiled.bad, compiled.bytes = map[[32]byte]*jsonschema.Schema{}, map[[32]byte]bool{}, 0
	}
	compiled.bytes += len(raw)
	if err != nil {
		compiled.bad[key] = true
		return nil
	}
	compiled.m[key] = s
	return s
}

// ValidateArguments checks args against the schema the model saw: the
// bound parameters for the JSON Schema profiles. Gemini's parameters are
// an OpenAPI 3.0 subset (nullable, no JSON Schema type lists), not JSON
// Schema: its calls are checked after mapping back, against the tool's
// own schema (ValidateOwnArguments). nil when valid, when the tool binds
// no parameters, or when the schema does not compile.
func (b *Bound) ValidateArguments(args map[string]any) error {
	if b.Parameters == nil {
		return nil
	}
	return validateAgainst(b.Parameters, args)
}

// ValidateOwnArguments checks the MCP tool's own arguments (after mapping
// back) against the tool's own input schema, as the catalog holds it. A
// schema that is not a JSON object (absent, true) accepts anything.
func ValidateOwnArguments(t Tool, args map[string]any) error {
	m, ok := t.InputSchema.(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	return validateAgainst(m, args)
}

func validateAgainst(params, args map[string]any) error {
	s := schemaFor(params)
	if s == nil {
		return nil
	}
	if args == nil {
		args = map[string]any{}
	}
	// The validator reads JSON values: a round trip turns structpb's
	// float64 numbers into json.Number, as the schema library expects.
	raw, err := json.Marshal(args)
	if err != nil {
		return &ArgumentError{Reason: "arguments are not JSON: " + err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return &ArgumentError{Reason: "arguments are not JSON: " + err.Error()}
	}
	err = s.Validate(inst)
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return nil
	}
	return firstLeaf(ve)
}

var printer = message.NewPrinter(language.English)

// firstLeaf is the deepest, then first-by-pointer, failure of the error
// tree ($ref'd schemas included): the most specific thing a model can fix.
func firstLeaf(ve *jsonschema.ValidationError) *ArgumentError {
	type leaf struct {
		ptr []string
		msg string
	}
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if e.ErrorKind != nil {
				leaves = append(leaves, leaf{e.InstanceLocation, e.ErrorKind.LocalizedString(printer)})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return &ArgumentError{Reason: "the arguments do not match the schema"}
	}
	sort.SliceStable(leaves, func(i, j int) bool {
		if len(leaves[i].ptr) != len(leaves[j].ptr) {
			return len(leaves[i].ptr) > len(leaves[j].ptr)
		}
		return strings.Join(leaves[i].ptr, "/") < strings.Join(leaves[j].ptr, "/")
	})
	l := leaves[0]
	if len(l.msg) > 300 {
		l.msg = l.msg[:300] + "…"
	}
	return &ArgumentError{Pointer: pointer(l.ptr), Reason: l.msg}
}

// pointer is the RFC 6901 JSON pointer of a path.
func pointer(path []string) string {
	var sb strings.Builder
	for _, p := range path {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}
