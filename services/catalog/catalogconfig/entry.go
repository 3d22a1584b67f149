package catalogconfig

import (
	"bytes"
	"encoding/json"
)

// MarshalEntry encodes the server's mcpServers entry as Marshal writes it
// in the file (known keys, then unknown keys; placeholders unexpanded): the
// form the catalog's PostgreSQL store keeps per server
// (docs/decisions/0087-catalog-config-in-postgresql.md).
func (s *Server) MarshalEntry() ([]byte, error) { return s.marshal() }

// Document builds an extensions file content holding only mcpServers, with
// the given entries (name and MarshalEntry text) in order; Parse reads it
// back as those servers.
func Document(names []string, entries [][]byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"mcpServers":{`)
	for i, n := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(entries[i])
	}
	buf.WriteString("}}")
	return buf.Bytes()
}
