package main

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	line := "07140348 10 n 02 congratulation 1 felicitation 1 006 @ 07139873 n 0000 ;u 06295235 n 0000 + 00882016 v 0202 + 01772516 v 0103 + 00882016 v 0101 + 00881679 v 0102 | (usually plural) an expression of pleasure  "
	s, key, err := parse(line, true)
	if err != nil {
		t.Fatal(err)
	}
	if key != "n:07140348" {
		t.Errorf("key %q", key)
	}
	if !slices.Equal(s.words, []string{"congratulation", "felicitation"}) {
		t.Errorf("words %v", s.words)
	}
	// The hypernym and the four related verbs; the usage domain (;u) is left out.
	want := []string{"n:07139873", "v:00882016", "v:01772516", "v:00882016", "v:00881679"}
	if !slices.Equal(s.ptrs, want) {
		t.Errorf("pointers %v, want %v", s.ptrs, want)
	}
	if s.gloss != "(usually plural) an expression of pleasure" {
		t.Errorf("gloss %q", s.gloss)
	}
	s, _, err = parse(line, false)
	if err != nil || !slices.Equal(s.ptrs, want[:1]) {
		t.Errorf("without related: %v %v", s.ptrs, err)
	}
	// Satellite adjectives live in data.adj; markers like "(a)" are cut;
	// multi-word lemmas become words.
	adj := "00001740 00 s 02 able(a) 0 big_deal 0 001 & 00002098 a 0000 | having the necessary means"
	s, key, err = parse(adj, true)
	if err != nil || key != "a:00001740" || !slices.Equal(s.words, []string{"able", "big deal"}) || !slices.Equal(s.ptrs, []string{"a:00002098"}) {
		t.Errorf("adjective: %q %v %v %v", key, s.words, s.ptrs, err)
	}
	if _, _, err := parse("00001740 00 s", true); err == nil {
		t.Error("a short line must be an error")
	}
	if _, _, err := parse("00001740 00 s 03 able 0 | x", true); err == nil {
		t.Error("a truncated word list must be an error")
	}
}
