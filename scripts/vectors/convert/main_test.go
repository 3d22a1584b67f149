package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/internal/search/vectors"
)

func TestReadVecAndCount(t *testing.T) {
	dir := t.TempDir()
	vec := filepath.Join(dir, "v.vec")
	corpus := filepath.Join(dir, "train.txt")
	if err := os.WriteFile(vec, []byte("3 2\n</s> 0.1 0.1\nfile 1 0\nfolder 0.5 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corpus, []byte("file folder file\nfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	words, vecs, dim, err := readVec(vec)
	if err != nil {
		t.Fatal(err)
	}
	if dim != 2 || len(words) != 2 || words[0] != "file" || vecs[1][0] != 0.5 {
		t.Fatalf("readVec = %v %v %d", words, vecs, dim)
	}
	c, err := countWords(corpus)
	if err != nil || c["file"] != 3 || c["folder"] != 1 {
		t.Fatalf("countWords = %v %v", c, err)
	}
	f, err := os.Create(filepath.Join(dir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := vectors.Encode(f, dim, words, []uint64{3, 1}, vecs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, "out.bin"))
	tab, err := vectors.Decode(raw)
	if err != nil || tab.Prob("file") != 0.75 {
		t.Fatalf("decode: %v %v", tab, err)
	}
	if err := os.WriteFile(vec, []byte("1 3\nfile 1 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := readVec(vec); err == nil {
		t.Fatal("short row accepted")
	}
}
