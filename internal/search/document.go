package search

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"
)

// ID is the document's identity in an index: Key, or Name when Key is empty.
func (d *Document) ID() string {
	if d.Key != "" {
		return d.Key
	}
	return d.Name
}

// Document is one searchable item: an MCP tool (catalog) or a skill
// (DescribeSkills). Only Name is required; every other field is optional
// text that feeds ranking.
type Document struct {
	// Name is the exposed name; select: and results use it, and it is
	// indexed. Must be non-empty valid UTF-8.
	Name string
	// Key identifies the document when Name alone is not unique (one index
	// holding several namespaces, e.g. the catalog's per-tenant names,
	// docs/decisions/0106-per-tenant-name-namespaces.md); empty means Name.
	// Candidates, Remove, Get, HasVector, Names and Result.Key use it; it is
	// not indexed.
	Key string
	// OriginalName is the upstream name when it differs from Name (e.g. a
	// shortened or server-prefixed name); it is indexed with Name.
	OriginalName string
	// Server is the owning server's name (indexed in the server field).
	Server string
	// ServerDescription describes the server (indexed in the server field).
	ServerDescription string
	// Title is a human-readable title (MCP tool annotations title, skill title).
	Title string
	// Description is the tool or skill description.
	Description string
	// ParamNames lists the input parameter names (top-level properties).
	ParamNames []string
	// ParamDescriptions lists the parameter descriptions (any order).
	ParamDescriptions []string
	// Keywords are extra indexed words (e.g. routing keywords, skill tags);
	// they are indexed with the title field.
	Keywords []string
}

// ParamsFromSchema extracts the top-level parameter names (sorted) and their
// descriptions from a JSON Schema object (MCP inputSchema). A missing, empty
// or malformed schema yields no parameters; it is never an error because a
// schema's shape is the upstream server's business.
func ParamsFromSchema(schema []byte) (names, descriptions []string) {
	if len(schema) == 0 {
		return nil, nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, nil
	}
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var p struct {
			Description string `json:"description"`
			Title       string `json:"title"`
		}
		if json.Unmarshal(s.Properties[name], &p) != nil {
			continue
		}
		if d := strings.TrimSpace(p.Description); d != "" {
			descriptions = append(descriptions, d)
		} else if t := strings.TrimSpace(p.Title); t != "" {
			descriptions = append(descriptions, t)
		}
	}
	return names, descriptions
}

// field numbers the BM25F fields.
type field int

const (
	fieldName field = iota
	fieldTitle
	fieldDescription
	fieldParams
	fieldServer
	numFields
)

// fieldNames are the names reported in Result.Matched.
var fieldNames = [numFields]string{"name", "title", "description", "parameters", "server"}

// fieldTexts returns the text of every BM25F field of d.
func (d *Document) fieldTexts() [numFields][]string {
	var f [numFields][]string
	f[fieldName] = []string{d.Name}
	if d.OriginalName != "" && d.OriginalName != d.Name {
		f[fieldName] = append(f[fieldName], d.OriginalName)
	}
	f[fieldTitle] = append([]string{d.Title}, d.Keywords...)
	f[fieldDescription] = []string{d.Description}
	f[fieldParams] = append(slices.Clone(d.ParamNames), d.ParamDescriptions...)
	f[fieldServer] = []string{d.Server, d.ServerDescription}
	return f
}

// semanticText is the text an Embedder sees for d: name words, title and
// description, and with server the server's name words and description.
func (d *Document) semanticText(server, compounds bool) string {
	var b strings.Builder
	splitWords(d.Name, func(w string) {
		b.WriteString(w)
		b.WriteByte(' ')
		if compounds {
			for _, part := range splitCompound(w) {
				b.WriteString(part)
				b.WriteByte(' ')
			}
		}
	})
	if d.Title != "" {
		b.WriteString(". ")
		b.WriteString(d.Title)
	}
	if d.Description != "" {
		b.WriteString(". ")
		b.WriteString(d.Description)
	}
	if server && d.Server != "" {
		b.WriteString(". ")
		splitWords(d.Server, func(w string) { b.WriteString(w); b.WriteByte(' ') })
	}
	if server && d.ServerDescription != "" {
		b.WriteString(". ")
		b.WriteString(d.ServerDescription)
	}
	return b.String()
}

// contentHash identifies everything of d that affects ranking.
func (d *Document) contentHash() [32]byte {
	h := sha256.New()
	putN := func(l int) {
		var n [8]byte
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
	}
	put := func(s string) {
		putN(len(s))
		h.Write([]byte(s))
	}
	put(d.Name)
	put(d.OriginalName)
	put(d.Server)
	put(d.ServerDescription)
	put(d.Title)
	put(d.Description)
	for _, list := range [][]string{d.ParamNames, d.ParamDescriptions, d.Keywords} {
		putN(len(list))
		for _, s := range list {
			put(s)
		}
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
