package catalog

import (
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// canonJSON returns the RFC 8785 (JSON Canonicalization Scheme) form of a
// JSON document, byte for byte what github.com/gowebpki/jcs Transform
// returns, and the same verdict on what is malformed
// (docs/decisions/0148-single-pass-canonical-json.md).
//
// A single pass writes the canonical text straight into one buffer: strings
// without escapes are copied, integers of at most 15 digits are kept as they
// are, and an object's members are written in document order and reordered
// in place only when they were not already in RFC 8785 order. Anything
// outside that fast path — an error of any kind, a \u escape of a surrogate,
// an escaped object key, nesting deeper than canonMaxDepth — hands the whole
// document to the library, which then decides (and words the error). The
// fast path is therefore never the one that rejects, and FuzzCanonJSON
// checks it agrees with the library on every input it accepts.
func canonJSON(src []byte) ([]byte, error) {
	p := canonParser{src: src}
	out, ok := p.document(make([]byte, 0, len(src)))
	if ok {
		return out, nil
	}
	return jcs.Transform(src)
}

// canonMaxDepth bounds the nesting the fast path handles: reordering an
// object copies its members once, so the work is at most canonMaxDepth
// times the document's size; deeper documents go to the library, whose
// tree costs O(n) whatever the depth.
const canonMaxDepth = 48

// canonMember is one object member as written: its raw key (no escapes, a
// slice of the input) and the span of `"key":value` in the output.
type canonMember struct {
	key        []byte
	start, end int
}

type canonParser struct {
	src   []byte
	i     int
	depth int
	// members is a stack shared by nested objects (each uses its own tail).
	members []canonMember
	// scratch holds an object's output while its members are reordered.
	scratch []byte
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (p *canonParser) skipSpace() {
	for p.i < len(p.src) && isJSONSpace(p.src[p.i]) {
		p.i++
	}
}

func (p *canonParser) document(dst []byte) ([]byte, bool) {
	p.skipSpace()
	dst, ok := p.value(dst)
	if !ok {
		return nil, false
	}
	p.skipSpace()
	return dst, p.i == len(p.src)
}

func (p *canonParser) value(dst []byte) ([]byte, bool) {
	if p.i >= len(p.src) {
		return nil, false
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		return p.str(dst)
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	}
	return nil, false
}

// tokenEnd returns the end of a scalar token starting at p.i: the library
// reads a literal or number up to ',', ']', '}', whitespace or the end.
func (p *canonParser) tokenEnd() int {
	j := p.i
	for j < len(p.src) {
		c := p.src[j]
		if c == ',' || c == ']' || c == '}' || isJSONSpace(c) {
			break
		}
		j++
	}
	return j
}

func (p *canonParser) literal(dst []byte, lit string) ([]byte, bool) {
	end := p.tokenEnd()
	if string(p.src[p.i:end]) != lit {
		return nil, false
	}
	p.i = end
	return append(dst, lit...), true
}

// number validates the RFC 8259 §6 grammar and writes the ES6 form of the
// number (RFC 8785 §3.2.2.3): short integers as they are, any other through
// strconv.ParseFloat and jcs.NumberToJSON, as the library does.
func (p *canonParser) number(dst []byte) ([]byte, bool) {
	end := p.tokenEnd()
	tok := p.src[p.i:end]
	j := 0
	if j < len(tok) && tok[j] == '-' {
		j++
	}
	intStart := j
	switch {
	case j < len(tok) && tok[j] == '0':
		j++
	case j < len(tok) && tok[j] >= '1' && tok[j] <= '9':
		for j < len(tok) && tok[j] >= '0' && tok[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	digits := j - intStart
	simple := true
	if j < len(tok) && tok[j] == '.' {
		simple = false
		j++
		k := j
		for j < len(tok) && tok[j] >= '0' && tok[j] <= '9' {
			j++
		}
		if j == k {
			return nil, false
		}
	}
	if j < len(tok) && (tok[j] == 'e' || tok[j] == 'E') {
		simple = false
		j++
		if j < len(tok) && (tok[j] == '+' || tok[j] == '-') {
			j++
		}
		k := j
		for j < len(tok) && tok[j] >= '0' && tok[j] <= '9' {
			j++
		}
		if j == k {
			return nil, false
		}
	}
	if j != len(tok) {
		return nil, false
	}
	p.i = end
	if simple && digits <= 15 {
		// An integer below 10^15 is exact in binary64 and ES6 prints it
		// digit for digit; only -0 changes (to 0).
		if string(tok) == "-0" {
			return append(dst, '0'), true
		}
		return append(dst, tok...), true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return nil, false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, false
	}
	return append(dst, s...), true
}

// shortEscapes are the two-character escapes RFC 8785 §3.2.2.2 writes for
// control characters (the others are \u00xx, lowercase).
var shortEscapes = [0x20]byte{'\b': 'b', '\t': 't', '\n': 'n', '\f': 'f', '\r': 'r'}

const hexDigits = "0123456789abcdef"

// appendCanonRune writes one unescaped character in RFC 8785 string form.
func appendCanonRune(dst []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r < 0x20:
		if e := shortEscapes[r]; e != 0 {
			return append(dst, '\\', e)
		}
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	case r < utf8.RuneSelf:
		return append(dst, byte(r))
	}
	return utf8.AppendRune(dst, r)
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// str writes the string at p.i (its opening quote) in canonical form.
func (p *canonParser) str(dst []byte) ([]byte, bool) {
	p.i++ // the opening quote
	dst = append(dst, '"')
	src := p.src
	run := p.i // start of the pending run of bytes copied as they are
	for p.i < len(src) {
		c := src[p.i]
		switch {
		case c == '"':
			dst = append(dst, src[run:p.i]...)
			p.i++
			return append(dst, '"'), true
		case c < 0x20:
			return nil, false
		case c == '\\':
			dst = append(dst, src[run:p.i]...)
			if p.i+1 >= len(src) {
				return nil, false
			}
			e := src[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\':
				dst = append(dst, '\\', e)
			case '/':
				dst = append(dst, '/')
			case 'b':
				dst = append(dst, '\\', 'b')
			case 'f':
				dst = append(dst, '\\', 'f')
			case 'n':
				dst = append(dst, '\\', 'n')
			case 'r':
				dst = append(dst, '\\', 'r')
			case 't':
				dst = append(dst, '\\', 't')
			case 'u':
				if p.i+4 > len(src) {
					return nil, false
				}
				var r rune
				for k := 0; k < 4; k++ {
					v, ok := hexVal(src[p.i+k])
					if !ok {
						return nil, false
					}
					r = r<<4 | v
				}
				p.i += 4
				if utf16.IsSurrogate(r) {
					return nil, false // pairs and lone halves: the library decides
				}
				dst = appendCanonRune(dst, r)
			default:
				return nil, false
			}
			run = p.i
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(src[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false
			}
			p.i += size
		}
	}
	return nil, false
}

// key reads an object key at p.i (its opening quote) that has no escapes
// and is valid UTF-8; it returns the raw key (escaped keys go to the library).
func (p *canonParser) key() ([]byte, bool) {
	p.i++
	start := p.i
	src := p.src
	for p.i < len(src) {
		c := src[p.i]
		switch {
		case c == '"':
			k := src[start:p.i]
			p.i++
			return k, true
		case c < 0x20 || c == '\\':
			return nil, false
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(src[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false
			}
			p.i += size
		}
	}
	return nil, false
}

func (p *canonParser) array(dst []byte) ([]byte, bool) {
	if p.depth++; p.depth > canonMaxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++
	dst = append(dst, '[')
	p.skipSpace()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		return append(dst, ']'), true
	}
	for {
		var ok bool
		p.skipSpace()
		if dst, ok = p.value(dst); !ok {
			return nil, false
		}
		p.skipSpace()
		if p.i >= len(p.src) {
			return nil, false
		}
		switch p.src[p.i] {
		case ',':
			p.i++
			dst = append(dst, ',')
		case ']':
			p.i++
			return append(dst, ']'), true
		default:
			return nil, false
		}
	}
}

// compareKeys orders object keys by their UTF-16 code units (RFC 8785
// §3.2.3). Byte order of UTF-8 agrees with it except between characters
// at or above U+E000 and supplementary ones, so only keys that differ at a
// byte of 0xEE or above are compared by code units.
func compareKeys(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < 0xEE && b[i] < 0xEE {
		return int(a[i]) - int(b[i])
	}
	// The keys share everything before the character that holds byte i, so
	// that character decides: its first UTF-16 code unit, then (two
	// supplementary characters with the same high surrogate) the code
	// point. No allocation, whatever the number of keys.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
		return int(ua) - int(ub)
	}
	return int(ra) - int(rb)
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

func (p *canonParser) object(dst []byte) ([]byte, bool) {
	if p.depth++; p.depth > canonMaxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++
	objStart := len(dst)
	dst = append(dst, '{')
	p.skipSpace()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
		return append(dst, '}'), true
	}
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	sorted := true
	for {
		p.skipSpace()
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return nil, false
		}
		k, ok := p.key()
		if !ok {
			return nil, false
		}
		p.skipSpace()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.skipSpace()
		start := len(dst)
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
		if dst, ok = p.value(dst); !ok {
			return nil, false
		}
		if len(p.members) > base && compareKeys(p.members[len(p.members)-1].key, k) >= 0 {
			sorted = false
		}
		p.members = append(p.members, canonMember{key: k, start: start, end: len(dst)})
		p.skipSpace()
		if p.i >= len(p.src) {
			return nil, false
		}
		switch p.src[p.i] {
		case ',':
			p.i++
			dst = append(dst, ',')
			continue
		case '}':
			p.i++
		default:
			return nil, false
		}
		break
	}
	if !sorted {
		ms := p.members[base:]
		slices.SortFunc(ms, func(a, b canonMember) int { return compareKeys(a.key, b.key) })
		for i := 1; i < len(ms); i++ {
			if compareKeys(ms[i-1].key, ms[i].key) == 0 {
				return nil, false // a duplicate key: the library words the error
			}
		}
		p.scratch = append(p.scratch[:0], dst[objStart:]...)
		dst = append(dst[:objStart], '{')
		for i, m := range ms {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, p.scratch[m.start-objStart:m.end-objStart]...)
		}
	}
	return append(dst, '}'), true
}

// canonStringOf returns the RFC 8785 form of s as a JSON string, the same
// bytes as jcs.Transform(json.Marshal(s)): json.Marshal replaces each byte
// of invalid UTF-8 by U+FFFD, and its other escapes (<, >, &, U+2028,
// U+2029) are undone by canonicalisation.
func canonStringOf(s string) []byte {
	return appendCanonString(make([]byte, 0, len(s)+2), s)
}

// appendCanonString appends canonStringOf(s) to out.
func appendCanonString(out []byte, s string) []byte {
	out = append(out, '"')
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		out = append(out, s[run:i]...)
		if c < utf8.RuneSelf {
			out = appendCanonRune(out, rune(c))
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
		}
		run = i
	}
	out = append(out, s[run:]...)
	return append(out, '"')
}
