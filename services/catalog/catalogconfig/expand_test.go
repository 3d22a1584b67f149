package catalogconfig

import (
	"errors"
	"strings"
	"testing"
)

// TestExpandPOSIXForms checks every supported form against the values a
// POSIX shell gives (sh -c 'echo "${VAR:-x}"' ...), for a set, an empty and
// an unset variable.
func TestExpandPOSIXForms(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": "", "HOST": "h"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"${SET:-d}":                       "v",
		"${EMPTY:-d}":                     "d",
		"${UNSET:-d}":                     "d",
		"${SET-d}":                        "v",
		"${EMPTY-d}":                      "",
		"${UNSET-d}":                      "d",
		"${SET:+a}":                       "a",
		"${EMPTY:+a}":                     "",
		"${UNSET:+a}":                     "",
		"${SET+a}":                        "a",
		"${EMPTY+a}":                      "a",
		"${UNSET+a}":                      "",
		"${SET:?need it}":                 "v",
		"${EMPTY?need it}":                "",
		"${UNSET:-}":                      "",
		"http://${UNSET:-$HOST}:${P:-80}": "http://h:80",
		"${UNSET:-${ALSO:-${HOST}}}/x":    "h/x",
		"${UNSET:-a}b}":                   "ab}",
		"${UNSET:-$$}":                    "$",
	} {
		got, err := ExpandString(in, lookup)
		if err != nil || got != want {
			t.Errorf("%q -> %q, %v; want %q", in, got, err, want)
		}
	}
	// A default that is not used is not expanded, so its missing variable is no error.
	if got, err := ExpandString("${SET:-$NOPE}", lookup); err != nil || got != "v" {
		t.Errorf("unused default: %q, %v", got, err)
	}
	if _, err := ExpandString("${UNSET:-$NOPE}", lookup); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("used default with a missing variable: %v", err)
	}
}

func TestExpandRequiredAndErrorsNameNoValue(t *testing.T) {
	env := map[string]string{"SECRET_TOKEN": "s3cr3t-value", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := Server{Name: "gh", Command: "node", Args: []string{"x"},
		Env: map[string]string{"GITHUB_TOKEN": "${GH_TOKEN:?set GH_TOKEN to a personal access token}", "B": "${SECRET_TOKEN}"}}
	_, err := Expand(s, lookup)
	var me *MissingVarError
	if !errors.As(err, &me) || me.Var != "GH_TOKEN" || me.Field != "env.GITHUB_TOKEN" || me.Empty {
		t.Fatalf("err = %#v", err)
	}
	want := "mcpServers.gh.env.GITHUB_TOKEN: environment variable GH_TOKEN is not set: set GH_TOKEN to a personal access token"
	if err.Error() != want {
		t.Fatalf("err = %q\nwant  %q", err, want)
	}
	s.Env["GITHUB_TOKEN"] = "${EMPTY:?must not be empty}"
	_, err = Expand(s, lookup)
	if err == nil || err.Error() != "mcpServers.gh.env.GITHUB_TOKEN: environment variable EMPTY is empty: must not be empty" {
		t.Fatalf("empty: %v", err)
	}
	// Unset ${VAR} without a default still fails the server, naming the variable.
	s.Env["GITHUB_TOKEN"] = "${GH_TOKEN}"
	_, err = Expand(s, lookup)
	if err == nil || err.Error() != "mcpServers.gh.env.GITHUB_TOKEN: environment variable GH_TOKEN is not set" {
		t.Fatalf("plain: %v", err)
	}
	// Unsupported operators fail with the expression as written.
	for _, in := range []string{"${X:=d}", "${X#pre}", "${X%suf}", "${X:}", "${X bad}"} {
		s.Env["GITHUB_TOKEN"] = in
		_, err = Expand(s, lookup)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Expr != in || !strings.Contains(err.Error(), "mcpServers.gh.env.GITHUB_TOKEN") {
			t.Errorf("%q: err = %v", in, err)
		}
	}
	// No error ever carries a variable's value.
	for _, in := range []string{"${SECRET_TOKEN:=x}", "${SECRET_TOKEN}${NOPE}", "${NOPE:?${SECRET_TOKEN}}"} {
		s.Env["GITHUB_TOKEN"] = in
		if _, err := Expand(s, lookup); err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: err = %v", in, err)
		}
	}
}

// TestClaudeDesktopAndWindsurfKeys: `disabled`, `serverUrl` and the
// warnings for keys Toolplane does not act on.
func TestClaudeDesktopAndWindsurfKeys(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {
	  "off":   {"command": "npx", "args": ["-y", "x"], "disabled": true, "autoApprove": ["read"]},
	  "on":    {"command": "npx", "disabled": false, "alwaysAllow": [], "timeout": 30},
	  "both":  {"command": "npx", "enabled": true, "disabled": true},
	  "wind":  {"serverUrl": "https://h.example/mcp/sse", "headers": {"Authorization": "Bearer ${T:-x}"}},
	  "dup":   {"url": "http://a/mcp", "serverUrl": "http://b/mcp"},
	  "plain": {"command": "npx"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*Server{}
	for i := range f.Servers {
		by[f.Servers[i].Name] = &f.Servers[i]
	}
	if by["off"].IsEnabled() || !by["on"].IsEnabled() || by["both"].IsEnabled() || !by["plain"].IsEnabled() {
		t.Fatal("disabled not honoured")
	}
	w := strings.Join(by["off"].Warnings(), "\n")
	if !strings.Contains(w, "mcpServers.off.autoApprove: unknown key") || strings.Contains(w, "disabled") {
		t.Errorf("off warnings: %s", w)
	}
	w = strings.Join(by["on"].Warnings(), "\n")
	if !strings.Contains(w, "mcpServers.on.alwaysAllow: unknown key") || !strings.Contains(w, "mcpServers.on.timeout: unknown key") || !strings.Contains(w, "tool_call_timeout") {
		t.Errorf("on warnings: %s", w)
	}
	if w := by["both"].Warnings(); len(w) != 1 || !strings.Contains(w[0], "mcpServers.both.disabled: contradicts enabled") {
		t.Errorf("both warnings: %v", w)
	}
	if len(by["plain"].Warnings()) != 0 || len(by["wind"].Warnings()) != 0 {
		t.Errorf("unexpected warnings: %v %v", by["plain"].Warnings(), by["wind"].Warnings())
	}
	if w := by["dup"].Warnings(); len(w) != 1 || !strings.Contains(w[0], "mcpServers.dup.serverUrl: ignored") {
		t.Errorf("dup warnings: %v", w)
	}
	// serverUrl is streamable HTTP even when its path ends in /sse.
	if got := by["wind"].EffectiveType(); got != TypeHTTP {
		t.Fatalf("serverUrl type %s", got)
	}
	if err := by["wind"].Validate(); err != nil {
		t.Fatal(err)
	}
	x, err := Expand(*by["wind"], func(string) (string, bool) { return "", false })
	if err != nil || x.URL != "https://h.example/mcp/sse" || x.EffectiveType() != TypeHTTP || x.Headers["Authorization"] != "Bearer x" {
		t.Fatalf("expanded %+v %v", x, err)
	}
	// Enabling keeps the file's spelling; a rewrite keeps every key.
	by["off"].SetEnabled(true)
	if !by["off"].IsEnabled() || by["off"].Enabled != nil || *by["off"].Disabled {
		t.Fatalf("SetEnabled(true) on disabled: %+v", by["off"])
	}
	by["both"].SetEnabled(true)
	by["plain"].SetEnabled(false)
	if !by["both"].IsEnabled() || by["plain"].IsEnabled() || by["plain"].Disabled != nil {
		t.Fatal("SetEnabled")
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Servers {
		if !f.Servers[i].Equal(&g.Servers[i]) {
			t.Fatalf("server %s changed on rewrite:\n%s", f.Servers[i].Name, out)
		}
	}
	if !strings.Contains(string(out), `"serverUrl": "https://h.example/mcp/sse"`) || !strings.Contains(string(out), `"autoApprove"`) {
		t.Fatalf("rewrite lost keys:\n%s", out)
	}
}

// TestExampleStaticFile keeps examples/static-tools.jsonl (the file format
// README.md documents) loadable: rows with and without the optional keys, a
// blank line, a row without `server` (it gets the configured server's name).
func TestExampleStaticFile(t *testing.T) {
	rows, err := LoadStatic("../../../examples/static-tools.jsonl", "crm")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Server != "billing" || rows[1].Title != "Refund an invoice" || len(rows[1].Annotations) == 0 ||
		rows[2].Server != "crm" || rows[2].InputSchema != nil {
		t.Fatalf("rows: %+v", rows)
	}
}
