package skillsscan

// automaton is an Aho-Corasick DFA over the keywords of every rule, so the
// prefilter reads each file once whatever the number of keywords
// (Aho & Corasick, "Efficient string matching", CACM 1975). Keywords are
// lowercase ASCII; the input is ASCII-lowercased first.
type automaton struct {
	delta [][256]int32 // full transition function (goto + failure folded in)
	out   [][]int32    // keyword entries ending in each state
	entry []acEntry    // keyword entries: literal, boundaries, rule index
}

type acEntry struct {
	kw   keyword
	rule int // index into Ruleset.Rules
}

func newAutomaton(rules []*Rule) *automaton {
	a := &automaton{delta: [][256]int32{{}}, out: [][]int32{nil}}
	// Trie (goto function); 0 means "no edge" while building (state 0 is the root).
	for ri, r := range rules {
		for _, k := range r.keys {
			st := int32(0)
			for i := 0; i < len(k.lit); i++ {
				c := k.lit[i]
				if a.delta[st][c] == 0 {
					a.delta = append(a.delta, [256]int32{})
					a.out = append(a.out, nil)
					a.delta[st][c] = int32(len(a.delta) - 1)
				}
				st = a.delta[st][c]
			}
			a.out[st] = append(a.out[st], int32(len(a.entry)))
			a.entry = append(a.entry, acEntry{kw: k, rule: ri})
		}
	}
	// Breadth-first failure links, folded into a complete DFA.
	fail := make([]int32, len(a.delta))
	var queue []int32
	for c := 0; c < 256; c++ {
		if s := a.delta[0][c]; s != 0 {
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		a.out[st] = append(a.out[st], a.out[fail[st]]...)
		for c := 0; c < 256; c++ {
			if next := a.delta[st][c]; next != 0 {
				fail[next] = a.delta[fail[st]][c]
				queue = append(queue, next)
			} else {
				a.delta[st][c] = a.delta[fail[st]][c]
			}
		}
	}
	return a
}

// scan calls hit(entry, line) for every keyword occurrence in lower that
// respects its word boundaries; line is the 0-based line of the occurrence
// (keywords never contain a newline).
func (a *automaton) scan(lower string, hit func(e acEntry, line int)) {
	st, line := int32(0), 0
	for i := 0; i < len(lower); i++ {
		c := lower[i]
		st = a.delta[st][c]
		for _, ei := range a.out[st] {
			e := a.entry[ei]
			start, end := i+1-len(e.kw.lit), i+1
			okBefore := !e.kw.before || start == 0 || !isWordByte(lower[start-1]) || !isWordByte(lower[start])
			okAfter := !e.kw.after || end == len(lower) || !isWordByte(lower[end]) || !isWordByte(lower[end-1])
			if okBefore && okAfter {
				hit(e, line)
			}
		}
		if c == '\n' {
			line++
		}
	}
}
