package vectors

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	words := []string{"file", "folder", "zero"}
	counts := []uint64{10, 5, 1}
	vecs := [][]float32{{3, 4, 0}, {-1, 2, 2}, {0, 0, 0}}
	var buf bytes.Buffer
	if err := Encode(&buf, 3, words, counts, vecs); err != nil {
		t.Fatal(err)
	}
	tab, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if tab.Dim != 3 || tab.Total != 16 || len(tab.Words) != 3 {
		t.Fatalf("header: dim %d total %d words %d", tab.Dim, tab.Total, len(tab.Words))
	}
	// Rows come back unit-normalised within int8 precision.
	want := map[string][]float64{"file": {0.6, 0.8, 0}, "folder": {-1.0 / 3, 2.0 / 3, 2.0 / 3}, "zero": {0, 0, 0}}
	for w, exp := range want {
		got := tab.Lookup(w)
		for i := range exp {
			if math.Abs(float64(got[i])-exp[i]) > 0.01 {
				t.Fatalf("%s[%d] = %v, want %v", w, i, got[i], exp[i])
			}
		}
	}
	if p := tab.Prob("folder"); math.Abs(p-5.0/16) > 1e-12 {
		t.Fatalf("Prob(folder) = %v", p)
	}
	if tab.Lookup("missing") != nil || tab.Prob("missing") != 0 {
		t.Fatal("unknown word found")
	}
	if _, _, ok := tab.Entry("missing"); ok {
		t.Fatal("Entry(missing) ok")
	}
	if v, p, ok := tab.Entry("file"); !ok || len(v) != 3 || p != 10.0/16 {
		t.Fatalf("Entry(file) = %v %v %v", v, p, ok)
	}
}

func TestDecodeRejectsCorruptInput(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, 2, []string{"a", "b"}, []uint64{1, 1}, [][]float32{{1, 0}, {0, 1}}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXXX\n"), good[6:]...),
		"truncated": good[:len(good)-1],
		"extra":     append(append([]byte{}, good...), 0),
	}
	for name, b := range cases {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := Encode(&buf, 2, []string{"a"}, []uint64{1}, [][]float32{{1}}); err == nil || !strings.Contains(err.Error(), "values") {
		t.Errorf("short row accepted: %v", err)
	}
}

func TestDefaultDecodes(t *testing.T) {
	tab, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Dim != 100 || len(tab.Words) != len(tab.Counts) || len(tab.Q) != len(tab.Words)*tab.Dim || len(tab.Scales) != len(tab.Words) {
		t.Fatalf("dim %d words %d data %d", tab.Dim, len(tab.Words), len(tab.Q))
	}
}
