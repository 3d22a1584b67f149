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
	// Scope is the visibility scope the pair was assigned in (GlobalScope
	// or a tenant; "" reads as GlobalScope).
	Scope string
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
	return assignStable(in, stored, nil)
}

// assignStable is AssignStable with names reserved by pairs of a scope
// that wins (reserved[name] = its holder): a stored assignment whose name
// is reserved by another pair is released and the pair named again, its
// old name reported as Previous.
func assignStable(in []Original, stored map[Key]Stored, reserved map[string]Key) []Stable {
	out := make([]Stable, len(in))
	taken := make(map[string]Key, len(stored)+len(in)+len(reserved))
	for n, k := range reserved {
		taken[n] = k
	}
	for k, s := range stored {
		if h, ok := reserved[s.Name]; ok && h != k {
			continue // displaced by the winning scope
		}
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
			if h, ok := reserved[s.Name]; ok && h != k {
				// A pair of the winning scope holds the name now.
				out[i].Previous = s.Name
				pending = append(pending, i)
				continue
			}
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

// GlobalScope is the visibility scope of servers every tenant (or several
// tenants) sees; a server of exactly one tenant has that tenant's scope.
const GlobalScope = "*"

// AssignScoped names every original across visibility scopes
// (docs/decisions/0105-tenant-scoped-servers.md,
// docs/decisions/0106-per-tenant-name-namespaces.md); scopes[i] is the scope
// of in[i]. Pairs of GlobalScope are named first by AssignStable over the
// stored global assignments only, as if no tenant pair existed: the global
// scope wins a conflict. The pairs of each tenant scope are then named on
// their own, keeping their stored assignments, except that no tenant pair
// keeps or takes a name a global pair holds or retains: a tenant pair whose
// stored name a global pair took is named again (Previous reports the old
// name). Names are distinct within the global scope and within each tenant
// scope together with the global scope; two tenant scopes may hold the
// same name (each tenant has its own namespace). A present pair whose
// server moved to another scope keeps its stored name when it is free
// there, subject to the same rule. The result is in input order.
func AssignScoped(in []Original, scopes []string, stored map[Key]Stored) []Stable {
	cur := make(map[Key]string, len(in))
	var gIn []Original
	var gIdx []int
	tIn := map[string][]Original{}
	tIdx := map[string][]int{}
	var tScopes []string
	for i, o := range in {
		sc := scopes[i]
		if sc == "" {
			sc = GlobalScope
		}
		cur[KeyOf(o)] = sc
		if sc == GlobalScope {
			gIn, gIdx = append(gIn, o), append(gIdx, i)
		} else {
			if _, ok := tIn[sc]; !ok {
				tScopes = append(tScopes, sc)
			}
			tIn[sc], tIdx[sc] = append(tIn[sc], o), append(tIdx[sc], i)
		}
	}
	storedG := make(map[Key]Stored, len(stored))
	storedT := map[string]map[Key]Stored{}
	var moved []Key
	for k, s := range stored {
		sc := s.Scope
		if sc == "" {
			sc = GlobalScope
		}
		if c, ok := cur[k]; ok && c != sc {
			moved = append(moved, k)
			continue
		}
		if sc == GlobalScope {
			storedG[k] = s
		} else {
			if storedT[sc] == nil {
				storedT[sc] = map[Key]Stored{}
			}
			storedT[sc][k] = s
		}
	}
	// A pair that moved scope keeps its name in the new scope unless a pair
	// stored there holds it (tenant names are not distinct across tenants).
	for _, k := range moved {
		s, sc := stored[k], cur[k]
		if sc == GlobalScope {
			storedG[k] = s // global names never equal a tenant's: free
			continue
		}
		if storedT[sc] == nil {
			storedT[sc] = map[Key]Stored{}
		}
		free := true
		for k2, s2 := range storedT[sc] {
			if s2.Name == s.Name && k2 != k {
				free = false
				break
			}
		}
		if free {
			storedT[sc][k] = s
		}
	}
	out := make([]Stable, len(in))
	gRes := AssignStable(gIn, storedG)
	for j, i := range gIdx {
		out[i] = gRes[j]
	}
	if len(tIn) == 0 {
		return out
	}
	reserved := make(map[string]Key, len(storedG)+len(gIn))
	for k, s := range storedG {
		reserved[s.Name] = k
	}
	for j, a := range gRes {
		if !a.Duplicate {
			reserved[a.Name] = KeyOf(gIn[j])
		}
	}
	for _, sc := range tScopes {
		tRes := assignStable(tIn[sc], storedT[sc], reserved)
		for j, i := range tIdx[sc] {
			out[i] = tRes[j]
		}
	}
	return out
}
