package catalogconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Declared tool lists (docs/architecture.md §10.6): an sse/http server
// whose tools cannot be listed before someone logs in — a per_user server
// behind OAuth — may declare them, so they are searchable before any user
// connects: `tools` as an array of {name, title?, description,
// inputSchema (or input_schema), outputSchema?, annotations?}, or `path`
// naming a JSON or JSONL file in the static-server format (static.go).
// The catalog uses them until a connection lists the server's real tools.

// isJSONArray reports whether raw is a JSON array.
func isJSONArray(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '['
}

// declaredTool is one entry of a `tools` array; both spellings of the
// schema keys are read (MCP's camelCase, the static files' snake_case).
type declaredTool struct {
	Name          string          `json:"name"`
	Title         string          `json:"title"`
	Description   string          `json:"description"`
	InputSchema   json.RawMessage `json:"inputSchema"`
	InputSchema2  json.RawMessage `json:"input_schema"`
	OutputSchema  json.RawMessage `json:"outputSchema"`
	OutputSchema2 json.RawMessage `json:"output_schema"`
	Annotations   json.RawMessage `json:"annotations"`
}

// DeclaredTools returns the server's declared tool list: the `tools`
// array, else the file at `path` (sse/http servers only; nil when none).
// Errors name the field.
func (s *Server) DeclaredTools() ([]StaticTool, error) {
	p := "mcpServers." + s.Name
	t := s.EffectiveType()
	if t != TypeHTTP && t != TypeSSE {
		return nil, nil
	}
	for _, f := range s.Extra {
		if f.Key != "tools" || !isJSONArray(f.Value) {
			continue
		}
		var rows []json.RawMessage
		if err := json.Unmarshal(f.Value, &rows); err != nil {
			return nil, fmt.Errorf("%s.tools: %w", p, err)
		}
		out := make([]StaticTool, 0, len(rows))
		seen := map[string]bool{}
		for i, raw := range rows {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var d declaredTool
			if err := dec.Decode(&d); err != nil {
				return nil, fmt.Errorf("%s.tools[%d]: %w", p, i, fieldError(err))
			}
			switch {
			case d.Name == "":
				return nil, fmt.Errorf("%s.tools[%d].name: required", p, i)
			case seen[d.Name]:
				return nil, fmt.Errorf("%s.tools[%d].name: %q declared twice", p, i, d.Name)
			}
			seen[d.Name] = true
			in, out2 := d.InputSchema, d.OutputSchema
			if len(in) == 0 {
				in = d.InputSchema2
			}
			if len(out2) == 0 {
				out2 = d.OutputSchema2
			}
			for field, v := range map[string]json.RawMessage{"inputSchema": in, "outputSchema": out2, "annotations": d.Annotations} {
				if b := bytes.TrimSpace(v); len(b) > 0 && string(b) != "null" && b[0] != '{' {
					return nil, fmt.Errorf("%s.tools[%d].%s: must be a JSON object", p, i, field)
				}
			}
			if string(bytes.TrimSpace(in)) == "null" {
				in = nil
			}
			if string(bytes.TrimSpace(out2)) == "null" {
				out2 = nil
			}
			out = append(out, StaticTool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: in, OutputSchema: out2,
				Annotations: d.Annotations, Server: s.Name})
		}
		return out, nil
	}
	if s.Path != "" {
		rows, err := LoadStatic(s.Path, s.Name)
		if err != nil {
			return nil, fmt.Errorf("%s.path: %w", p, err)
		}
		return rows, nil
	}
	return nil, nil
}

// validateDeclared checks a `tools` array (the file at `path` is read when
// the server starts, like a static server's): only sse/http servers
// declare tools.
func (s *Server) validateDeclared(p string) error {
	for _, f := range s.Extra {
		if f.Key == "tools" && isJSONArray(f.Value) {
			if t := s.EffectiveType(); t != TypeHTTP && t != TypeSSE {
				return fmt.Errorf("%s.tools: a tool list is declared only for sse/http servers (a %s server lists its own; use type static with path for a fixed list)", p, t)
			}
			_, err := s.DeclaredTools()
			return err
		}
	}
	return nil
}
