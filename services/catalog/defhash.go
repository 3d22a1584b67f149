package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// DefinitionInput is one tool as its definition hash sees it: everything
// that changes what the tool does or may be allowed to do.
type DefinitionInput struct {
	// Name is the exposed name.
	Name string
	// Title and Description ("" when absent).
	Title, Description string
	// InputSchema (nil = `{}`), OutputSchema and Annotations (nil = null), raw JSON.
	InputSchema, OutputSchema, Annotations json.RawMessage
}

// DefinitionCanon returns the RFC 8785 form of one tool definition:
// {"annotations": a or null, "description": d, "inputSchema": s or {},
// "name": n, "outputSchema": o or null, "title": t} (docs/architecture.md §8).
// Values are canonicalised by the jcs library and the members assembled in
// RFC 8785 key order, which is the canonical form of the whole object.
func DefinitionCanon(in DefinitionInput) ([]byte, error) {
	inp, err := canonParameters(in.Name, in.InputSchema)
	if err != nil {
		return nil, err
	}
	return definitionCanon(in, inp)
}

// definitionCanon is DefinitionCanon with the input schema already in
// canonical form (canonParameters), shared with the catalog hash element.
func definitionCanon(in DefinitionInput, inp []byte) ([]byte, error) {
	p, err := definitionPartsOf(in, inp)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(p.size())
	p.write(&b)
	return b.Bytes(), nil
}

// definitionParts are the canonical members of a definition (each RFC 8785).
type definitionParts struct {
	ann, desc, inp, name, outp, title []byte
}

func (p *definitionParts) size() int {
	return len(p.ann) + len(p.desc) + len(p.inp) + len(p.name) + len(p.outp) + len(p.title) + 96
}

// write writes the canonical object: members in RFC 8785 key order.
func (p *definitionParts) write(w io.Writer) {
	for _, part := range [][]byte{[]byte(`{"annotations":`), p.ann, []byte(`,"description":`), p.desc, []byte(`,"inputSchema":`), p.inp,
		[]byte(`,"name":`), p.name, []byte(`,"outputSchema":`), p.outp, []byte(`,"title":`), p.title, []byte(`}`)} {
		_, _ = w.Write(part)
	}
}

// hash is DefinitionHash of the canonical object, streamed into SHA-256
// (no copy of the definition is built).
func (p *definitionParts) hash() string {
	h := sha256.New()
	p.write(h)
	return hex.EncodeToString(h.Sum(nil))
}

// definitionPartsOf canonicalises the members of in; inp is the canonical
// input schema (canonParameters).
func definitionPartsOf(in DefinitionInput, inp []byte) (*definitionParts, error) {
	name, err := canonString(in.Name)
	if err != nil {
		return nil, err
	}
	desc, err := canonString(in.Description)
	if err != nil {
		return nil, err
	}
	return definitionPartsWith(in, name, desc, inp)
}

// definitionPartsWith is definitionPartsOf with the name and description
// already canonical (shared with the catalog hash element).
func definitionPartsWith(in DefinitionInput, name, desc, inp []byte) (*definitionParts, error) {
	raw := func(field string, v json.RawMessage, absent string) ([]byte, error) {
		t := bytes.TrimSpace(v)
		if len(t) == 0 || string(t) == "null" {
			return []byte(absent), nil
		}
		c, err := canonJSON(t)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %s: canonical JSON: %w", in.Name, field, err)
		}
		return c, nil
	}
	ann, err := raw("annotations", in.Annotations, "null")
	if err != nil {
		return nil, err
	}
	outp, err := raw("outputSchema", in.OutputSchema, "null")
	if err != nil {
		return nil, err
	}
	title, err := canonString(in.Title)
	if err != nil {
		return nil, err
	}
	return &definitionParts{ann: ann, desc: desc, inp: inp, name: name, outp: outp, title: title}, nil
}

// DefinitionHash is the hex SHA-256 (64 lowercase characters) of a
// definition's canonical form.
func DefinitionHash(canon []byte) string {
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:])
}

// definitionOf returns the canonical form and hash of a definition; a value
// that is not JSON (it cannot come from the wire decoder) is hashed as absent.
func definitionOf(in DefinitionInput) ([]byte, string) {
	c, err := DefinitionCanon(in)
	if err != nil {
		in.InputSchema, in.OutputSchema, in.Annotations = nil, nil, nil
		c, _ = DefinitionCanon(in)
	}
	return c, DefinitionHash(c)
}

// maxDiffChanges bounds the changes reported for one pair of definitions.
const maxDiffChanges = 500

// change is one difference of two JSON documents.
type change struct {
	Path           string
	Old, New       json.RawMessage
	hasOld, hasNew bool
}

// diffDefinitions compares two canonical definitions (old may be empty: a
// new tool, every member is added) member by member: objects recurse,
// arrays and scalars compare whole. Paths are JSON Pointers (RFC 6901).
func diffDefinitions(old, cur []byte) []change {
	var a, b any
	if len(old) > 0 {
		if decodeNumbers(old, &a) != nil {
			a = nil
		}
	} else {
		a = map[string]any{}
	}
	if decodeNumbers(cur, &b) != nil {
		b = nil
	}
	var out []change
	walkDiff("", a, b, true, true, &out)
	return out
}

// decodeNumbers decodes JSON keeping numbers exact (json.Number).
func decodeNumbers(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func walkDiff(path string, a, b any, hasA, hasB bool, out *[]change) {
	if len(*out) >= maxDiffChanges {
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB && hasA && hasB {
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			va, ia := ma[k]
			vb, ib := mb[k]
			walkDiff(path+"/"+pointerEscape(k), va, vb, ia, ib, out)
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if hasA == hasB && bytes.Equal(ja, jb) {
		return
	}
	c := change{Path: path, hasOld: hasA, hasNew: hasB}
	if hasA {
		c.Old = ja
	}
	if hasB {
		c.New = jb
	}
	*out = append(*out, c)
}

func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// changesProto converts changes to the API form.
func changesProto(cs []change) []*catalogv1.DefinitionChange {
	out := make([]*catalogv1.DefinitionChange, 0, len(cs))
	for _, c := range cs {
		d := &catalogv1.DefinitionChange{Path: c.Path}
		if c.hasOld {
			d.OldValue = jsonValue(c.Old)
		}
		if c.hasNew {
			d.NewValue = jsonValue(c.New)
		}
		out = append(out, d)
	}
	return out
}

func jsonValue(raw json.RawMessage) *structpb.Value {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return structpb.NewStringValue(string(raw))
	}
	pv, err := structpb.NewValue(v)
	if err != nil {
		return structpb.NewStringValue(string(raw))
	}
	return pv
}

// changesJSON is the audit form of changes: [{"path", "old", "new"}].
func changesJSON(cs []change) string {
	type rec struct {
		Path string          `json:"path"`
		Old  json.RawMessage `json:"old,omitempty"`
		New  json.RawMessage `json:"new,omitempty"`
	}
	rs := make([]rec, len(cs))
	for i, c := range cs {
		rs[i] = rec{c.Path, c.Old, c.New}
	}
	b, _ := json.Marshal(rs)
	return string(b)
}

// changesFromJSON parses the audit form back.
func changesFromJSON(s string) []change {
	var rs []struct {
		Path string          `json:"path"`
		Old  json.RawMessage `json:"old"`
		New  json.RawMessage `json:"new"`
	}
	if json.Unmarshal([]byte(s), &rs) != nil {
		return nil
	}
	out := make([]change, len(rs))
	for i, r := range rs {
		out[i] = change{Path: r.Path, Old: r.Old, New: r.New, hasOld: r.Old != nil, hasNew: r.New != nil}
	}
	return out
}
