package tokens

import (
	"strings"
	"testing"
)

// Reference counts from OpenAI's tiktoken for the same strings (the
// tokenizer's own test vectors: "hello world" is 2 tokens in both encodings).
func TestCount(t *testing.T) {
	for _, enc := range Encodings {
		c, err := New(enc)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name() != enc {
			t.Fatalf("Name() = %q, want %q", c.Name(), enc)
		}
		for _, tc := range []struct {
			in   string
			want int
		}{{"", 0}, {"hello world", 2}, {"hello  world", 3}} {
			n, err := c.Count(tc.in)
			if err != nil || n != tc.want {
				t.Fatalf("%s: Count(%q) = %d, %v; want %d", enc, tc.in, n, err, tc.want)
			}
		}
	}
	// The encodings differ on real text: o200k_base has the larger vocabulary.
	o, _ := New(O200kBase)
	cl, _ := New(Cl100kBase)
	text := "搜索网页并返回结果。Создать задачу в репозитории. डेटा पढ़ें"
	no, _ := o.Count(text)
	ncl, _ := cl.Count(text)
	if no == 0 || ncl == 0 || no == ncl {
		t.Fatalf("o200k_base %d, cl100k_base %d: want two different non-zero counts", no, ncl)
	}
	if again, _ := New(O200kBase); again != o {
		t.Fatal("New does not cache counters")
	}
}

func TestUnknownEncoding(t *testing.T) {
	_, err := New("p50k_base")
	if err == nil || !strings.Contains(err.Error(), `"p50k_base"`) || !strings.Contains(err.Error(), "o200k_base") {
		t.Fatalf("err = %v, want it to name the encoding and the supported ones", err)
	}
}
