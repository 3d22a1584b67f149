package catalogconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeclaredTools: a `tools` array declares an sse/http server's tools
// (both schema spellings), is written back unchanged, and bad entries are
// errors naming the field; `path` declares them from a JSONL file; a
// `tools` object stays per-tool overrides.
func TestDeclaredTools(t *testing.T) {
	doc := `{"mcpServers": {"tracker": {"type": "http", "url": "https://t.example/mcp", "session_scope": "per_user",
		"tools": [{"name": "whoami", "description": "Who am I", "inputSchema": {"type": "object"}},
		          {"name": "find", "title": "Find", "description": "Find issues", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}}}`
	f, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Servers[0]
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	rows, err := s.DeclaredTools()
	if err != nil || len(rows) != 2 || rows[0].Name != "whoami" || rows[1].Title != "Find" || !strings.Contains(string(rows[1].InputSchema), `"q"`) || rows[0].Server != "tracker" {
		t.Fatalf("declared: %+v %v", rows, err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if rows2, err := back.Servers[0].DeclaredTools(); err != nil || len(rows2) != 2 || string(rows2[1].InputSchema) != string(rows[1].InputSchema) || !strings.Contains(string(out), `"input_schema"`) {
		t.Fatalf("written back: %s %v", out, err)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Fatalf("a declared tool list warned as unknown: %v", w)
	}
	if c := s.Clone(); len(c.Extra) != len(s.Extra) {
		t.Fatal("Clone lost the declared tools")
	}

	dir := t.TempDir()
	jsonl := filepath.Join(dir, "tracker.jsonl")
	if err := os.WriteFile(jsonl, []byte(`{"name": "whoami", "description": "Who am I", "input_schema": {"type": "object"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = Parse([]byte(`{"mcpServers": {"tracker": {"type": "http", "url": "https://t.example/mcp", "path": "` + jsonl + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := f.Servers[0].DeclaredTools(); err != nil || len(rows) != 1 || rows[0].Server != "tracker" {
		t.Fatalf("from path: %+v %v", rows, err)
	}

	for _, c := range []struct{ server, want string }{
		{`"tracker": {"type": "http", "url": "https://t/mcp", "tools": [{"description": "x"}]}`, "mcpServers.tracker.tools[0].name: required"},
		{`"tracker": {"type": "http", "url": "https://t/mcp", "tools": [{"name": "a"}, {"name": "a"}]}`, `mcpServers.tracker.tools[1].name: "a" declared twice`},
		{`"tracker": {"type": "http", "url": "https://t/mcp", "tools": [{"name": "a", "inputSchema": "object"}]}`, "mcpServers.tracker.tools[0].inputSchema: must be a JSON object"},
		{`"tracker": {"type": "http", "url": "https://t/mcp", "tools": [{"name": "a", "schema": {}}]}`, `mcpServers.tracker.tools[0]: json: unknown field "schema"`},
		{`"local": {"command": "node", "tools": [{"name": "a"}]}`, "mcpServers.local.tools: a tool list is declared only for sse/http servers"},
	} {
		f, err := Parse([]byte(`{"mcpServers": {` + c.server + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Servers[0].Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.server, err, c.want)
		}
	}
	// An object is still the per-tool overrides.
	f, err = Parse([]byte(`{"mcpServers": {"tracker": {"type": "http", "url": "https://t/mcp", "tools": {"whoami": {"routing": {"mode": "prefer"}}}}}}`))
	if err != nil || f.Servers[0].Tools["whoami"].Routing == nil {
		t.Fatalf("overrides: %+v %v", f, err)
	}
	if rows, err := f.Servers[0].DeclaredTools(); err != nil || rows != nil {
		t.Fatalf("overrides read as declared tools: %+v %v", rows, err)
	}
}
