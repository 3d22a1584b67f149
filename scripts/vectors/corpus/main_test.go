package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/evalsearch"
)

func TestWriteLeavesOutEvaluatedText(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Find one server of each catalog-benchmark part.
	train, bench := "", ""
	for i := 0; train == "" || bench == ""; i++ {
		s := "srv" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if evalsearch.IsCatalogTrainServer(s) {
			train = s
		} else {
			bench = s
		}
	}
	cat := file("cat.jsonl", `{"name":"get_weather","description":"Weather for a city","input_schema":{"properties":{"city":{"description":"City name"}}},"server":"`+train+`"}
{"name":"toolret_copy","description":"Seen in toolret","input_schema":null,"server":"`+train+`"}
{"name":"x__read_file","description":"Another text","input_schema":null,"server":"`+train+`"}
{"name":"bench_tool","description":"Bench only text","input_schema":null,"server":"`+bench+`"}
`)
	other := file("other.jsonl", `{"name":"dup","description":"Bench only text","input_schema":null,"server":"elsewhere"}
{"name":"kept_too","description":"Send a message","input_schema":null,"server":"elsewhere"}
`)
	ex := file("ex.jsonl", `{"name":"fs__read_file","description":"  Seen in toolret ","input_schema":null,"server":"fs"}
`)
	var buf bytes.Buffer
	kept, dropped := write(&buf, []string{cat, other}, []string{ex}, cat)
	want := "get weather Weather for a city City name\nkept too Send a message\n"
	if buf.String() != want || kept != 2 || dropped != 4 {
		t.Fatalf("kept %d dropped %d:\n%s", kept, dropped, buf.String())
	}
}
