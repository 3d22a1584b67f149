package search

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// isCJK reports whether r is written without spaces between words (Han,
// Hiragana, Katakana, Hangul); such characters become one token each, as in
// the reference BM25 of testdata/toolret/*/README.md.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// splitWords splits s into lower-cased words: runs of letters and digits,
// broken at every other character, at camelCase boundaries ("getHTMLPage" →
// get, html, page) and around CJK characters, which are emitted one by one.
// Names are therefore split on `_ - . /` and camelCase as tool names need.
func splitWords(s string, emit func(string)) {
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			emit(string(buf))
			buf = buf[:0]
		}
	}
	var prev rune = -1 // previous rune inside the current word
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9'):
			buf = append(buf, byte(r))
		case r < utf8.RuneSelf && r >= 'A' && r <= 'Z':
			if prev >= 'a' && prev <= 'z' {
				flush()
			} else if prev >= 'A' && prev <= 'Z' && i < len(s) {
				// "HTMLPage": split before the last capital of a run when a
				// lower-case letter follows.
				if n, _ := utf8.DecodeRuneInString(s[i:]); n >= 'a' && n <= 'z' {
					flush()
				}
			}
			buf = append(buf, byte(r+'a'-'A'))
		case r >= utf8.RuneSelf && isCJK(r):
			flush()
			emit(string(r))
			r = -1
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if unicode.IsUpper(r) && prev >= 0 && unicode.IsLower(prev) {
				flush()
			}
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		default:
			flush()
			r = -1
		}
		prev = r
	}
	flush()
}

// stemCache memoises english.Stem; the vocabulary of a tool catalog is small
// (tens of thousands of words) so the cache is bounded by stemCacheMax.
var stemCache sync.Map // string → string

const stemCacheMax = 200_000

var stemCacheLen int64
var stemCacheMu sync.Mutex

// term turns a lower-cased word into an index term: "" for English stop
// words (Snowball list), the Snowball English stem for ASCII words of three
// or more letters, the word itself otherwise.
func term(w string) string {
	if english.IsStopWord(w) {
		return ""
	}
	if len(w) < 3 || !isASCIIAlpha(w) {
		return w
	}
	if v, ok := stemCache.Load(w); ok {
		return v.(string)
	}
	st := english.Stem(w, false)
	stemCacheMu.Lock()
	if stemCacheLen < stemCacheMax {
		stemCacheLen++
		stemCache.Store(w, st)
	}
	stemCacheMu.Unlock()
	return st
}

func isASCIIAlpha(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// terms appends the index terms of s to dst.
func terms(dst []string, s string) []string {
	splitWords(s, func(w string) {
		if t := term(w); t != "" {
			dst = append(dst, t)
		}
	})
	return dst
}

// queryTerms returns the distinct index terms of a query in first-seen order
// (each distinct term counts once, as in the reference BM25).
func queryTerms(s string) []string {
	all := terms(nil, s)
	seen := make(map[string]struct{}, len(all))
	out := all[:0]
	for _, t := range all {
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	return out
}
