package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gowebpki/jcs"
)

// HashInput is one tool as the catalog hash sees it.
type HashInput struct {
	// Name is the exposed name.
	Name string
	// Description is the tool description ("" when absent).
	Description string
	// Parameters is the raw input schema JSON (nil or empty = `{}`).
	Parameters json.RawMessage
}

// hashElement returns the RFC 8785 canonical form of one element of the
// hashed array: {"name": n, "schema": {"name": n, "description": d,
// "parameters": p}}.
func hashElement(in HashInput) ([]byte, error) {
	params := in.Parameters
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage(`{}`)
	}
	type schema struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	b, err := json.Marshal(struct {
		Name   string `json:"name"`
		Schema schema `json:"schema"`
	}{in.Name, schema{in.Name, in.Description, params}})
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", in.Name, err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("tool %q: canonical JSON: %w", in.Name, err)
	}
	return out, nil
}

// hashElements hashes canonical elements (already RFC 8785) sorted by exposed
// name. JCS serialises an array as its canonical elements joined by commas
// inside brackets, so hashing "[" + join + "]" equals hashing the canonical
// form of the whole array.
func hashElements(els []namedElement) string {
	slices.SortFunc(els, func(a, b namedElement) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	h := sha256.New()
	h.Write([]byte{'['})
	for i, e := range els {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(e.canon)
	}
	h.Write([]byte{']'})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

type namedElement struct {
	name  string
	canon []byte
}

// CatalogHash computes the catalog hash of a tool set exactly as ARCHITECTURE
// §8 defines it: the tools sorted by exposed name (byte order), each
// `{"name": <name>, "schema": {"name": <name>, "description": <text or "">,
// "parameters": <input schema, or {} when absent>}}`, the array serialised
// with RFC 8785 (JSON Canonicalization Scheme, github.com/gowebpki/jcs),
// SHA-256, the first 16 lowercase hex characters. Input order does not
// matter; availability is not part of it. The empty set hashes "[]".
func CatalogHash(tools []HashInput) (string, error) {
	els := make([]namedElement, len(tools))
	for i, t := range tools {
		c, err := hashElement(t)
		if err != nil {
			return "", err
		}
		els[i] = namedElement{t.Name, c}
	}
	return hashElements(els), nil
}
