package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/gowebpki/jcs"

	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// fastCanon runs only the single pass of canonJSON (no fallback).
func fastCanon(src []byte) ([]byte, bool) {
	p := canonParser{src: src}
	return p.document(nil)
}

// checkCanon compares canonJSON and its fast path with the jcs library on
// one document: same bytes, same verdict.
func checkCanon(t testing.TB, src []byte) (fast bool) {
	t.Helper()
	want, wantErr := jcs.Transform(src)
	got, ok := fastCanon(src)
	if ok {
		if wantErr != nil {
			t.Fatalf("fast path accepted %q, the library rejects it: %v", src, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("fast path differs on %q:\n got %q\nwant %q", src, got, want)
		}
	}
	all, err := canonJSON(src)
	if (err == nil) != (wantErr == nil) || !bytes.Equal(all, want) {
		t.Fatalf("canonJSON(%q) = %q, %v; library %q, %v", src, all, err, want, wantErr)
	}
	return ok
}

var canonSeeds = []string{
	`{}`, `[]`, ` {"b":1,"a":2} `, `{"a":{"d":[1,2,{"z":null,"y":true}],"c":false}}`, `"x"`, `42`, `-0`, `0.0`,
	`1e21`, `1E-7`, `123456789012345`, `1234567890123456789`, `-1.5e+300`, `1e400`, `1e-400`, `[1,]`, `[,1]`, `{"a":1,}`,
	`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `{"\u0061":1,"a":2}`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\u00e9\u0000\u001f\u007f"`,
	`"\/\b\f\n\r\t\"\\"`, `"tab	raw"`, "\"\xff\"", "\"\xed\xa0\x80\"", `{"é":1,"e":2,"":3}`, "{\"\ue000\":1,\"\U0001F600\":2}",
	`[true,false,null]`, `[truex]`, `[tr ue]`, `{"a" 1}`, `{"a":}`, `{"a":1]`, `[1 2]`, `1 2`, `  `, ``, `[01]`, `[1.]`, `[.5]`, `[+1]`,
	`[1e]`, `[-]`, `{"a":"b"}x`, "\"\u2028\u2029\"", `"\u0041\u00FF\uFFFF"`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`{"properties":{"query":{"type":"string","description":"q"},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10}},"required":["query"],"type":"object"}`,
}

func TestCanonJSONMatchesLibrary(t *testing.T) {
	fast := 0
	for _, s := range canonSeeds {
		if checkCanon(t, []byte(s)) {
			fast++
		}
	}
	if fast < len(canonSeeds)/3 {
		t.Errorf("only %d of %d seeds took the fast path", fast, len(canonSeeds))
	}
	// Reordering must not be the only path that works: a sorted object is
	// written without a copy, an unsorted one is reordered in place.
	for _, s := range []string{`{"a":1,"b":{"c":2,"d":3}}`, `{"b":{"d":3,"c":2},"a":1}`} {
		if !checkCanon(t, []byte(s)) {
			t.Errorf("%s did not take the fast path", s)
		}
	}
}

// TestCanonJSONRealCatalogs canonicalises every input schema of the two
// real catalogs of testdata/mcp-catalog both ways: byte for byte equal, and
// nearly all of them on the fast path.
func TestCanonJSONRealCatalogs(t *testing.T) {
	n, fast := 0, 0
	for _, f := range []string{"mcp-catalog/toolsdk-registry/tools.jsonl", "mcp-catalog/mcpm-registry/tools.jsonl"} {
		rows, err := catalogconfig.LoadStatic(testkit.SharedData(t, f), "x")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if len(r.InputSchema) > 0 {
				n++
				if checkCanon(t, r.InputSchema) {
					fast++
				} else if testing.Verbose() && n-fast < 4 {
					t.Logf("slow path: %.300s", r.InputSchema)
				}
			}
			if got, want := canonStringOf(r.Description), oldCanonString(t, r.Description); !bytes.Equal(got, want) {
				t.Fatalf("description of %s: %q vs %q", r.Name, got, want)
			}
		}
	}
	t.Logf("%d schemas, %d on the fast path", n, fast)
	if n < 2000 || fast < n*95/100 {
		t.Errorf("%d schemas, %d on the fast path (want >= 95%%)", n, fast)
	}
}

// TestCanonJSONRandomDocuments compares both on generated documents with
// unsorted, non-ASCII and supplementary keys, escapes, numbers of every form
// and deep nesting.
func TestCanonJSONRandomDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 148))
	keys := []string{"a", "b", "B", "é", "e", "\ue000", "\U0001F600", "\uffff", "z", "aa", "", "\\u0062", "\\n", "k\\\"q",
		"！", "ﬁ", "ﬁx", "😀a", "😁", "𝄞", "\u00e9", "ｚ", "€"} // raw U+FF01, U+FB01, supplementary, and U+E000+ beside them
	nums := []string{"0", "-0", "1", "-17", "3.25", "1e3", "1E-7", "123456789012345678", "0.000001", "1e21", "9007199254740993", "-2.5e-10"}
	strs := []string{`""`, `"plain"`, `"\u00e9"`, `"\ud83d\ude00"`, `"a\/b"`, `"\u001f\t"`, `"é€😀"`, `"\u2028"`}
	var gen func(d int) string
	gen = func(d int) string {
		switch k := rng.IntN(6); {
		case d > 60 || k == 0:
			return nums[rng.IntN(len(nums))]
		case k == 1:
			return strs[rng.IntN(len(strs))]
		case k == 2:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		case k == 3:
			var parts []string
			for i := rng.IntN(4); i > 0; i-- {
				parts = append(parts, gen(d+1))
			}
			return "[" + strings.Join(parts, " , ") + "]"
		default:
			var parts []string
			for i := rng.IntN(5); i > 0; i-- {
				parts = append(parts, fmt.Sprintf("%q:%s", keys[rng.IntN(len(keys))], gen(d+1)))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	fast := 0
	for i := 0; i < 3000; i++ {
		// %q writes Go escapes; the keys above are chosen so that they are
		// also JSON (or deliberately malformed JSON).
		if checkCanon(t, []byte(gen(0))) {
			fast++
		}
	}
	if fast < 1000 {
		t.Errorf("only %d of 3000 generated documents took the fast path", fast)
	}
}

func oldCanonString(t testing.TB, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzCanonJSON: the single pass agrees with github.com/gowebpki/jcs byte
// for byte on every document it accepts, never accepts one the library
// rejects, and canonJSON's verdict is the library's.
func FuzzCanonJSON(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkCanon(t, src)
	})
}

// FuzzCanonString: a name or description is canonicalised as
// jcs.Transform(json.Marshal(s)) would, invalid UTF-8 included.
func FuzzCanonString(f *testing.F) {
	for _, s := range []string{"", "plain", "é\u2028<>&", "\x00\x1f\x7f\"\\", "\xff\xfe", "\xed\xa0\x80", "😀\ue000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := canonStringOf(s), oldCanonString(t, s); !bytes.Equal(got, want) {
			t.Fatalf("canonStringOf(%q) = %q, want %q", s, got, want)
		}
	})
}

// TestCompareKeysIsUTF16Order: the byte shortcut and the one-character
// decision agree with sorting by UTF-16 code units on every pair of keys
// around the places where UTF-8 and UTF-16 orders differ.
func TestCompareKeysIsUTF16Order(t *testing.T) {
	chars := []string{"", "a", "z", "\u007f", "é", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uedff", "\uee00", "！", "\uffff", "\U00010000", "😀", "😁", "\U0010ffff"}
	var keys []string
	for _, a := range chars {
		for _, b := range chars {
			keys = append(keys, a+b, "k"+a+b)
		}
	}
	sign := func(n int) int { return min(max(n, -1), 1) }
	for _, a := range keys {
		for _, b := range keys {
			want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
			if got := compareKeys([]byte(a), []byte(b)); sign(got) != sign(want) {
				t.Fatalf("compareKeys(%q, %q) = %d, UTF-16 order %d", a, b, got, want)
			}
		}
	}
}
