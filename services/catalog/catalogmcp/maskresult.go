package catalogmcp

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// Results of a server (tools/call, resources/read, prompts/get,
// completion/complete and the notifications of a call) pass through the
// server's masker before they leave the catalog, so that no value of its
// configuration's secrets (`${VAR}` values, env, header, URL query and
// OAuth values; see masker) reaches the runtime's store or a model
// (docs/decisions/0117-one-masking-facility.md, note of 2026-12-01). Only
// the configured values are masked here, not the `Bearer <token>` and
// `<secret-name>=<value>` shapes: a tool reading a file that holds such a
// line is the user's own data.

// resultValues returns secrets with, for each, the form it takes inside a
// JSON string (a tool printing JSON.stringify(process.env) in a text block
// escapes a `"` or `\` of the value), longest first.
func resultValues(secrets []string) []string {
	out := append([]string(nil), secrets...)
	for _, v := range secrets {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			if e := strings.TrimSuffix(buf.String(), "\n"); len(e) > 2 && e[1:len(e)-1] != v {
				out = append(out, e[1:len(e)-1])
			}
		}
		if b, err := json.Marshal(v); err == nil && string(b[1:len(b)-1]) != v {
			out = append(out, string(b[1:len(b)-1])) // with HTML escaping
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// values returns s with every configured secret (and its JSON escapings)
// replaced by catalogconfig.Mask (no shape rules).
func (m *masker) values(s string) string {
	if m == nil || s == "" {
		return s
	}
	for _, v := range m.inResults {
		s = strings.ReplaceAll(s, v, catalogconfig.Mask)
	}
	return s
}

// maskJSON returns raw with the configured secrets masked in every string
// value and object key, raw itself when nothing was masked (or raw is not
// JSON). Base64 payloads (a resource's "blob", the "data" of an image or
// audio block) are left as they are: masking inside them would corrupt them.
func (m *masker) maskJSON(raw json.RawMessage) json.RawMessage {
	if m == nil || len(m.secrets) == 0 || len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	out, changed := m.maskAny(v)
	if !changed {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return raw
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func (m *masker) maskAny(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		y := m.values(x)
		return y, y != x
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			if x[i], c = m.maskAny(e); c {
				changed = true
			}
		}
		return x, changed
	case map[string]any:
		t, _ := x["type"].(string)
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			if base64Field(k, t, x) {
				out[k] = e
				continue
			}
			mk := m.values(k)
			me, c := m.maskAny(e)
			if c || mk != k {
				changed = true
			}
			out[mk] = me
		}
		return out, changed
	}
	return v, false
}

// base64Field reports whether key k of an object of MCP type t holds a
// base64 payload.
func base64Field(k, t string, obj map[string]any) bool {
	switch k {
	case "blob":
		_, isString := obj["blob"].(string)
		_, hasURI := obj["uri"]
		return isString && hasURI // resource contents
	case "data":
		return t == "image" || t == "audio"
	}
	return false
}

// maskResult masks a tool result in place (content blocks, structuredContent
// and _meta) and returns it.
func (m *masker) maskResult(res *Result) *Result {
	if res == nil || m == nil || len(m.secrets) == 0 {
		return res
	}
	for i, c := range res.Content {
		res.Content[i] = m.maskJSON(c)
	}
	res.StructuredContent = m.maskJSON(res.StructuredContent)
	res.Meta = m.maskJSON(res.Meta)
	return res
}

// maskNotify wraps notify so that the params of each notification (logging
// messages, progress messages) have the server's secrets masked.
func (m *masker) maskNotify(notify func(Notification)) func(Notification) {
	if notify == nil || m == nil || len(m.secrets) == 0 {
		return notify
	}
	return func(n Notification) {
		n.Params = m.maskJSON(n.Params)
		notify(n)
	}
}

// MaskResult returns raw (a result object of server: resources/read,
// prompts/get, completion/complete) with the server's secrets masked in
// every string value; raw itself for an unknown server or when nothing was
// masked.
func (m *Manager) MaskResult(server string, raw json.RawMessage) json.RawMessage {
	sup, ok := m.Supervisor(server)
	if !ok {
		return raw
	}
	return sup.mask.maskJSON(raw)
}
