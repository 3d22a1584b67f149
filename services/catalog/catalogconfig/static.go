package catalogconfig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// StaticTool is one row of a static tool file, in the format of
// testdata/mcp-catalog/*/tools.jsonl:
// `{"name", "description", "input_schema" (object or null), "server"}`.
// Optional keys `title`, `output_schema` and `annotations` are read when present.
type StaticTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Server       string          `json:"server"`
}

// LoadStatic reads a static tool file: a JSON array of rows, or JSONL (one
// row per line; blank lines skipped). A row without a name is an error naming
// its line (JSONL) or index (JSON); a row without a server gets defaultServer.
func LoadStatic(path, defaultServer string) ([]StaticTool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []StaticTool
	trim := bytes.TrimSpace(data)
	if len(trim) > 0 && trim[0] == '[' {
		if err := json.Unmarshal(trim, &rows); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i := range rows {
			if rows[i].Name == "" {
				return nil, fmt.Errorf("%s: row %d: name is required", path, i)
			}
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		line := 0
		for sc.Scan() {
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var r StaticTool
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			if r.Name == "" {
				return nil, fmt.Errorf("%s:%d: name is required", path, line)
			}
			rows = append(rows, r)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	for i := range rows {
		if rows[i].Server == "" {
			rows[i].Server = defaultServer
		}
		if string(bytes.TrimSpace(rows[i].InputSchema)) == "null" {
			rows[i].InputSchema = nil
		}
		if string(bytes.TrimSpace(rows[i].OutputSchema)) == "null" {
			rows[i].OutputSchema = nil
		}
	}
	return rows, nil
}
