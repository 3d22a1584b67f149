package catalogmcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// TestMaskResult: every string of a tool result (text blocks, embedded
// resource text, structuredContent values and keys, _meta, an error
// result's text) has the server's secrets masked, including a value that
// JSON escapes; base64 payloads are left intact; a result without secrets
// keeps its bytes.
func TestMaskResult(t *testing.T) {
	const sec = `s3cr<et>"val`
	m := newMasker(catalogconfig.Server{Env: map[string]string{"API_KEY": sec}}, map[string]string{"V": "fromenv-1234"}, nil)
	enc, _ := json.Marshal(sec)
	esc := string(enc[1 : len(enc)-1])
	blob := "AAAA" + "fromenv-1234"
	// A text block holding JSON (as get-env prints the environment): the
	// value appears escaped inside the decoded text.
	nested, _ := json.Marshal(`{"API_KEY": ` + string(enc) + `}`)
	res := &Result{
		IsError: true,
		Content: []json.RawMessage{
			json.RawMessage(`{"type":"text","text":"failed: key ` + esc + `"}`),
			json.RawMessage(`{"type":"resource","resource":{"uri":"x://fromenv-1234","text":"v=fromenv-1234"}}`),
			json.RawMessage(`{"type":"resource","resource":{"uri":"x://b","blob":"` + blob + `"}}`),
			json.RawMessage(`{"type":"image","data":"` + blob + `","mimeType":"image/png"}`),
			json.RawMessage(`{"type":"text","text":"nothing here",  "x": 1.50}`),
			json.RawMessage(`{"type":"text","text":` + string(nested) + `}`),
		},
		StructuredContent: json.RawMessage(`{"env":{"fromenv-1234":["a","` + esc + `"]},"n":12345678901234567890,"data":"fromenv-1234"}`),
		Meta:              json.RawMessage(`{"note":"fromenv-1234"}`),
	}
	m.maskResult(res)
	all := string(res.StructuredContent) + string(res.Meta)
	for _, c := range res.Content {
		all += string(c)
	}
	rest := strings.ReplaceAll(all, blob, "")
	if strings.Contains(rest, "fromenv-1234") || strings.Contains(rest, esc) || strings.Contains(rest, "s3cr") || strings.Contains(rest, "u003cet") {
		t.Errorf("secret left: %s", all)
	}
	if strings.Count(all, blob) != 2 {
		t.Errorf("base64 payloads changed: %s", all)
	}
	if string(res.Content[4]) != `{"type":"text","text":"nothing here",  "x": 1.50}` {
		t.Errorf("unmasked block rewritten: %s", res.Content[4])
	}
	if !strings.Contains(string(res.StructuredContent), "12345678901234567890") {
		t.Errorf("number changed: %s", res.StructuredContent)
	}
	for _, want := range []string{`"{\"API_KEY\": \"***\"}"`, `"failed: key ***"`, `"text":"v=***"`, `"uri":"x://***"`, `"env":{"***":["a","***"]}`, `"data":"***"`, `{"note":"***"}`} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in %s", want, all)
		}
	}
	var n []Notification
	m.maskNotify(func(x Notification) { n = append(n, x) })(Notification{Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":"token fromenv-1234"}`)})
	if len(n) != 1 || strings.Contains(string(n[0].Params), "fromenv") {
		t.Errorf("notification: %v", n)
	}
}
