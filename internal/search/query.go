package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on queries (docs/search.md "Query forms": "ranked queries up to 4 KiB",
// "select: … capped at 20") and docs/deerflow.md §2.3.
const (
	// MaxQueryBytes bounds ranked and `+required` queries (4 KiB).
	MaxQueryBytes = 4096
	// MaxSelectQueryBytes bounds a `select:` query (1 MiB), so a select with
	// ~10,000 names is accepted and answered with the first MaxSelectResults.
	MaxSelectQueryBytes = 1 << 20
	// MaxSelectResults caps `select:` results; more matches set Truncated.
	MaxSelectResults = 20
	// MaxRegexChars bounds a REGEX-mode pattern, counted in characters
	// (docs/deerflow.md §2.3 compatibility limit).
	MaxRegexChars = 200
	// DefaultLimit is the result count used when Request.Limit <= 0
	// (docs/deerflow.md §2.3 MAX_RESULTS).
	DefaultLimit = 5
)

// QueryKind is the form of a parsed query (docs/deerflow.md §2.3).
type QueryKind int

const (
	// KindEmpty is a blank query (or a bare "+"); it yields no results.
	KindEmpty QueryKind = iota
	// KindSelect is `select:a,b`: exact, case-sensitive names in catalog order.
	KindSelect
	// KindRequired is `+required rest`: the required token must be a
	// case-insensitive substring of the tool name; rest ranks.
	KindRequired
	// KindRanked is any other query: ranked retrieval in the request's mode.
	KindRanked
)

// String returns "empty", "select", "required" or "ranked".
func (k QueryKind) String() string {
	switch k {
	case KindSelect:
		return "select"
	case KindRequired:
		return "required"
	case KindRanked:
		return "ranked"
	default:
		return "empty"
	}
}

// Query is a parsed tool-search query.
type Query struct {
	// Kind is the query form.
	Kind QueryKind
	// Names holds the distinct, trimmed, non-empty names of a select query
	// in request order (results are nevertheless in catalog order).
	Names []string
	// Required is the lower-cased required name fragment of a `+` query.
	Required string
	// Text is the text to rank: the whole trimmed query for KindRanked, the
	// rest after the required token for KindRequired (may be empty).
	Text string
}

// ParseQuery parses a raw tool_search query following docs/deerflow.md §2.3:
// the query is whitespace-trimmed; "" → KindEmpty; `select:` prefix → names
// split on commas and trimmed; `+` prefix → the first whitespace-separated
// token is the required fragment (lower-cased) and the rest is ranked;
// anything else is ranked as a whole.
//
// Errors (all matching ErrInvalidQuery, Field "query"): invalid UTF-8, a
// select query over MaxSelectQueryBytes, any other query over MaxQueryBytes.
func ParseQuery(raw string) (Query, error) {
	if !utf8.ValidString(raw) {
		return Query{}, queryErr("query", "not valid UTF-8")
	}
	q := strings.TrimSpace(raw)
	if q == "" {
		return Query{Kind: KindEmpty}, nil
	}
	if rest, ok := strings.CutPrefix(q, "select:"); ok {
		if len(q) > MaxSelectQueryBytes {
			return Query{}, queryErr("query", "select query is %d bytes, longer than %d", len(q), MaxSelectQueryBytes)
		}
		parts := strings.Split(rest, ",")
		seen := make(map[string]struct{}, len(parts))
		names := make([]string, 0, len(parts))
		for _, p := range parts {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if _, dup := seen[p]; dup {
				continue
			}
			seen[p] = struct{}{}
			names = append(names, p)
		}
		if len(names) == 0 {
			return Query{Kind: KindEmpty}, nil
		}
		return Query{Kind: KindSelect, Names: names}, nil
	}
	if len(q) > MaxQueryBytes {
		return Query{}, queryErr("query", "%d bytes, longer than %d", len(q), MaxQueryBytes)
	}
	if rest, ok := strings.CutPrefix(q, "+"); ok {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		var req, text string
		if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
			req, text = rest[:i], rest[i:]
		} else {
			req, text = rest, ""
		}
		if req == "" {
			return Query{Kind: KindEmpty}, nil
		}
		return Query{Kind: KindRequired, Required: strings.ToLower(req), Text: strings.TrimSpace(text)}, nil
	}
	return Query{Kind: KindRanked, Text: q}, nil
}
