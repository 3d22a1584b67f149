package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
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
// hashed array: {"name": n, "schema": {"description": d, "name": n,
// "parameters": p}}. Each value is canonicalised by the jcs library; the
// element is then assembled with its keys already in RFC 8785 order
// ("name" < "schema"; "description" < "name" < "parameters"), which is
// exactly the canonical form of the whole object (RFC 8785 §3.2.3).
func hashElement(in HashInput) ([]byte, error) {
	cp, err := canonParameters(in.Name, in.Parameters)
	if err != nil {
		return nil, err
	}
	return elementOf(in.Name, in.Description, cp)
}

// canonParameters returns the RFC 8785 form of an input schema (absent or
// null = `{}`).
func canonParameters(name string, params json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return []byte(`{}`), nil
	}
	cp, err := canonJSON(params)
	if err != nil {
		return nil, fmt.Errorf("tool %q: parameters: canonical JSON: %w", name, err)
	}
	return cp, nil
}

// elementOf assembles the hashed element from the canonical parameters cp
// in one buffer (name and description canonicalised in place).
func elementOf(name, description string, cp []byte) ([]byte, error) {
	out := make([]byte, 0, len(cp)+2*len(name)+len(description)+56)
	out = append(out, `{"name":`...)
	out = appendCanonString(out, name)
	out = append(out, `,"schema":{"description":`...)
	out = appendCanonString(out, description)
	out = append(out, `,"name":`...)
	out = appendCanonString(out, name)
	out = append(out, `,"parameters":`...)
	out = append(out, cp...)
	return append(out, `}}`...), nil
}

// elementWith assembles the element from canonical name, description and
// parameters.
func elementWith(cn, cd, cp []byte) []byte {
	out := make([]byte, 0, len(cp)+2*len(cn)+len(cd)+48)
	out = append(out, `{"name":`...)
	out = append(out, cn...)
	out = append(out, `,"schema":{"description":`...)
	out = append(out, cd...)
	out = append(out, `,"name":`...)
	out = append(out, cn...)
	out = append(out, `,"parameters":`...)
	out = append(out, cp...)
	out = append(out, `}}`...)
	return out
}

// canonString returns the RFC 8785 serialisation of a JSON string
// (canonStringOf; it cannot fail, the error is kept for its callers).
func canonString(s string) ([]byte, error) {
	return canonStringOf(s), nil
}

// canonAll computes hashElement for every input, spread over the available
// CPUs for large sets.
func canonAll(in []HashInput) ([][]byte, error) {
	out := make([][]byte, len(in))
	workers := min(runtime.GOMAXPROCS(0), max(len(in)/256, 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(in); i += workers {
				c, err := hashElement(in[i])
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = c
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
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

// CatalogHash computes the catalog hash of a tool set exactly as docs/architecture.md
// §8 defines it: the tools sorted by exposed name (byte order), each
// `{"name": <name>, "schema": {"name": <name>, "description": <text or "">,
// "parameters": <input schema, or {} when absent>}}`, the array serialised
// with RFC 8785 (JSON Canonicalization Scheme, github.com/gowebpki/jcs),
// SHA-256, the first 16 lowercase hex characters. Input order does not
// matter; availability is not part of it. The empty set hashes "[]".
func CatalogHash(tools []HashInput) (string, error) {
	canon, err := canonAll(tools)
	if err != nil {
		return "", err
	}
	els := make([]namedElement, len(tools))
	for i, t := range tools {
		els[i] = namedElement{t.Name, canon[i]}
	}
	return hashElements(els), nil
}
