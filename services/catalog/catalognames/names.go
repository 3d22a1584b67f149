// Package catalognames assigns provider-safe exposed tool names
// (docs/architecture.md §7): every name matches `^[A-Za-z0-9_-]{1,64}$`.
//
// Rules, in order:
//  1. The base name is `<server>_<tool>` when the tool is prefixed, else `<tool>`.
//  2. A base that is already valid is used as is. Otherwise every character
//     outside [A-Za-z0-9_-] becomes `_`, the result is cut to 55 bytes and
//     `_` + Suffix(server, tool) (8 hex characters of SHA-256 over
//     server + NUL + tool) is appended, so two different originals never
//     merge into one name ("a.b" and "a b" get different suffixes).
//  3. Collisions are settled in input order (config-file order): the first
//     original keeps the name, a later one gets the suffixed form (and, in
//     the astronomically unlikely case that is taken too, a 16-character
//     suffix, then a counter).
package catalognames

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
)

// MaxLen is the maximum exposed name length (docs/architecture.md §7).
const MaxLen = 64

// Valid is the exposed-name pattern.
var Valid = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Original identifies a tool as its server reports it.
type Original struct {
	// Server is the server name, Tool the tool's original name.
	Server, Tool string
	// Prefixed asks for the `<server>_` prefix.
	Prefixed bool
}

// Assigned is the result for one Original.
type Assigned struct {
	// Name is the exposed name.
	Name string
	// Suffixed reports that a hash suffix was added (sanitised, shortened or collided).
	Suffixed bool
	// Collided reports that the plain name was taken by an earlier tool.
	Collided bool
}

// Suffix returns the deterministic hash suffix of an original (server, tool)
// pair: the first n hex characters of SHA-256(server + "\x00" + tool).
func Suffix(server, tool string, n int) string {
	h := sha256.Sum256([]byte(server + "\x00" + tool))
	return hex.EncodeToString(h[:])[:n]
}

// Base returns the unsanitised base name of o.
func Base(o Original) string {
	if o.Prefixed {
		return o.Server + "_" + o.Tool
	}
	return o.Tool
}

// Sanitize replaces every byte outside [A-Za-z0-9_-] with '_' (a multi-byte
// UTF-8 character becomes one '_' per byte).
func Sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// isValid is Valid.MatchString without the regexp engine (hot in Assign).
func isValid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func suffixed(o Original, n int) string {
	s := Sanitize(Base(o))
	keep := MaxLen - 1 - n
	if len(s) > keep {
		s = s[:keep]
	}
	return s + "_" + Suffix(o.Server, o.Tool, n)
}

// Assign names every original in order (see the package doc). The result has
// one entry per input, in input order, all distinct.
func Assign(in []Original) []Assigned {
	out := make([]Assigned, len(in))
	taken := make(map[string]bool, len(in))
	for i, o := range in {
		base := Base(o)
		a := Assigned{}
		if isValid(base) {
			a.Name = base
		} else {
			a.Name, a.Suffixed = suffixed(o, 8), true
		}
		if taken[a.Name] {
			a.Collided = true
			a.Suffixed = true
			cand := suffixed(o, 8)
			if taken[cand] {
				cand = suffixed(o, 16)
			}
			for k := 2; taken[cand]; k++ {
				c := strconv.Itoa(k)
				cand = suffixed(o, 16)[:MaxLen-len(c)-1] + "_" + c
			}
			a.Name = cand
		}
		taken[a.Name] = true
		out[i] = a
	}
	return out
}
