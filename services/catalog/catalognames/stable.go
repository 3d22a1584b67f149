package catalognames

import "strconv"

// Key identifies a tool by its original pair.
type Key struct {
	// Server is the origin server, Tool the original tool name.
	Server, Tool string
}

// KeyOf returns the key of o.
func KeyOf(o Original) Key { return Key{o.Server, o.Tool} }

// Stored is a persisted assignment of one pair (docs/decisions/0100).
type Stored struct {
	// Base is the plain name the pair asked for when it was assigned.
	Base string
	// Name is the exposed name assigned.
	Name string
}

// Stable is the result of AssignStable for one Original.
type Stable struct {
	// Name is the exposed name.
	Name string
	// Plain is the name the pair asks for: its base when valid, else the
	// sanitised, suffixed form.
	Plain string
	// Suffixed reports that Name is not the plain base (sanitised, shortened
	// or de-duplicated).
	Suffixed bool
	// Collided reports that Plain is held by another pair; Holder names it.
	Collided bool
	Holder   Key
	// New reports that the assignment was made now (to be persisted);
	// Previous is the name the pair had before when an earlier assignment
	// was replaced because its base changed (tool_name_prefix changed).
	New      bool
	Previous string
	// Duplicate reports a repeated pair in the input (a static file listing
	// one tool twice): it got a name for this listing only, not persisted.
	Duplicate bool
}

// isBase reports whether s == Base(o) without building Base(o).
func isBase(o Original, s string) bool {
	if !o.Prefixed {
		return s == o.Tool
	}
	return len(s) == len(o.Server)+1+len(o.Tool) && s[:len(o.Server)] == o.Server && s[len(o.Server)] == '_' && s[len(o.Server)+1:] == o.Tool
}

// Plain returns the name o asks for: Base(o) when valid, else the sanitised
// form with the 8-character suffix.
func Plain(o Original) string {
	if b := Base(o); isValid(b) {
		return b
	}
	return suffixed(o, 8)
}

// AssignStable names every original, keeping persisted assignments
// (docs/architecture.md §7): a pair with a stored assignment of the same
// base keeps its name whatever else is in the input, whatever the order;
// a pair without one gets its plain name unless any other pair, present or
// only stored (retained), holds it, and the suffixed form otherwise (8 hex
// characters, then 16, then a counter). Config order no longer decides
// anything between pairs that already have names; it only orders pairs
// that are new in the same call. The result is in input order; names are
// distinct.
func AssignStable(in []Original, stored map[Key]Stored) []Stable {
	out := make([]Stable, len(in))
	taken := make(map[string]Key, len(stored)+len(in))
	for k, s := range stored {
		taken[s.Name] = k
	}
	seen := make(map[Key]bool, len(in))
	pending := make([]int, 0)
	for i, o := range in {
		k := KeyOf(o)
		if seen[k] {
			out[i].Duplicate = true
			pending = append(pending, i)
			continue
		}
		seen[k] = true
		if s, ok := stored[k]; ok {
			if isBase(o, s.Base) {
				out[i].Name = s.Name
				continue
			}
			// The pair asks for another base now: release the old name.
			out[i].Previous = s.Name
			if taken[s.Name] == k {
				delete(taken, s.Name)
			}
		}
		pending = append(pending, i)
	}
	for _, i := range pending {
		o := in[i]
		k := KeyOf(o)
		a := &out[i]
		a.New = !a.Duplicate
		a.Plain = Plain(o)
		cand := a.Plain
		if h, ok := taken[cand]; ok && (h != k || a.Duplicate) {
			cand = suffixed(o, 8)
			if _, ok := taken[cand]; ok {
				cand = suffixed(o, 16)
			}
			for n := 2; ; n++ {
				if _, ok := taken[cand]; !ok {
					break
				}
				c := strconv.Itoa(n)
				cand = suffixed(o, 16)[:MaxLen-len(c)-1] + "_" + c
			}
		}
		a.Name = cand
		taken[cand] = k
	}
	for i, o := range in {
		a := &out[i]
		if isBase(o, a.Name) {
			a.Plain = a.Name // the common case: no allocation
			continue
		}
		a.Suffixed = true
		if a.Plain == "" {
			a.Plain = Plain(o)
		}
		if a.Duplicate {
			a.Collided, a.Holder = true, KeyOf(o)
		} else if a.Name != a.Plain {
			if h, ok := taken[a.Plain]; ok && h != KeyOf(o) {
				a.Collided, a.Holder = true, h
			}
		}
	}
	return out
}
