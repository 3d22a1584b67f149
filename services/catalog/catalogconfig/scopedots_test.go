package catalogconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestScopeDirDotDot: a value using ${TOOLPLANE_SCOPE_DIR} with a `..` path
// segment anywhere in it is refused for every writer (Validate is what the
// file, the global admin and the tenant admin all go through), naming the
// field; values inside the scope directory stay valid
// (docs/decisions/0136-tenant-admins-write-remote-servers-only.md).
func TestScopeDirDotDot(t *testing.T) {
	refused := []struct {
		srv   Server
		field string
	}{
		{Server{Args: []string{"x", "${TOOLPLANE_SCOPE_DIR}/../../../.."}}, "mcpServers.s.args[1]"},
		{Server{Args: []string{"$TOOLPLANE_SCOPE_DIR/.."}}, "mcpServers.s.args[0]"},
		{Server{Args: []string{"--root=${TOOLPLANE_SCOPE_DIR}/a/../../b"}}, "mcpServers.s.args[0]"},
		{Server{Args: []string{"../${TOOLPLANE_SCOPE_DIR}"}}, "mcpServers.s.args[0]"},
		{Server{Args: []string{"${TOOLPLANE_SCOPE_DIR:-..}"}}, "mcpServers.s.args[0]"},
		{Server{Args: []string{"${TOOLPLANE_SCOPE_DIR}\\..\\x"}}, "mcpServers.s.args[0]"},
		{Server{Env: map[string]string{"MEMORY_FILE_PATH": "${TOOLPLANE_SCOPE_DIR}/../../u-bob/memory.jsonl"}}, "mcpServers.s.env.MEMORY_FILE_PATH"},
		{Server{Env: map[string]string{"P": "/bin:${TOOLPLANE_SCOPE_DIR}/..:/x"}}, "mcpServers.s.env.P"},
		{Server{Cwd: "${TOOLPLANE_SCOPE_DIR}/.."}, "mcpServers.s.cwd"},
		// cwd in the scope dir: a relative `..` resolves from there.
		{Server{Cwd: "${TOOLPLANE_SCOPE_DIR}", Args: []string{"fs.js", "../../../.."}}, "mcpServers.s.args[1]"},
		{Server{Cwd: "${TOOLPLANE_SCOPE_DIR}/work", Env: map[string]string{"DB": "../../u-bob/db"}}, "mcpServers.s.env.DB"},
	}
	for _, c := range refused {
		s := c.srv
		s.Name, s.Command = "s", "node"
		err := s.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.field+": ") || !strings.Contains(err.Error(), "'..'") {
			t.Errorf("%+v: %v, want an error naming %s", c.srv, err, c.field)
		}
	}
	for _, ok := range []Server{
		{Args: []string{"${TOOLPLANE_SCOPE_DIR}/db", "${TOOLPLANE_SCOPE_DIR}/a..b/c...d"}},
		{Env: map[string]string{"MEMORY_FILE_PATH": "${TOOLPLANE_SCOPE_DIR}/memory.jsonl"}},
		{Cwd: "${TOOLPLANE_SCOPE_DIR}/work"},
		{Args: []string{"../server.js"}}, // no scope dir: the global command policy's concern
	} {
		ok.Name, ok.Command = "s", "node"
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestExpandRefusesScopeDirEscape: a `..` reaching a value that holds the
// scope directory through the environment (`${TOOLPLANE_SCOPE_DIR}${UP}`)
// fails the expansion, so the session never starts.
func TestExpandRefusesScopeDirEscape(t *testing.T) {
	s := Server{Name: "s", Command: "node", Args: []string{"${TOOLPLANE_SCOPE_DIR}${UP}"}, Env: map[string]string{"D": "${TOOLPLANE_SCOPE_DIR}/x"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	lookup := LookupWithScopeDir(func(k string) (string, bool) { return map[string]string{"UP": "/../.."}[k], true })
	if _, err := Expand(s, lookup); err == nil || !strings.HasPrefix(err.Error(), "mcpServers.s.args[0]: ") {
		t.Fatalf("expanding ${TOOLPLANE_SCOPE_DIR}${UP} with UP=/../..: %v", err)
	}
	lookup = LookupWithScopeDir(func(k string) (string, bool) { return "/sub", true })
	out, err := Expand(s, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if b := BindScopeDir(out, "/data/s"); b.Args[0] != "/data/s/sub" || b.Env["D"] != "/data/s/x" {
		t.Fatalf("bound: %v %v", b.Args, b.Env)
	}
}

// TestReferenceCoversOAuth: Reference sees the `${VAR}` of an oauth block
// (ExpandOAuth expands its strings from the environment); a block that does
// not decode counts as a reference.
func TestReferenceCoversOAuth(t *testing.T) {
	withOAuth := func(raw string) Server {
		return Server{Name: "s", Type: TypeHTTP, URL: "https://x.example/mcp", Extra: []RawField{{Key: "oauth", Value: json.RawMessage(raw)}}}
	}
	for raw, want := range map[string]string{
		`{"token_url": "https://t.example/token", "client_id": "c", "client_secret": "${SECRET}"}`: "oauth.client_secret",
		`{"token_url": "${TOKEN_URL}", "client_id": "c", "client_secret": "x"}`:                    "oauth.token_url",
		`{"grant_type": "refresh_token", "refresh_token": "$RT"}`:                                  "oauth.refresh_token",
		`{"client_id": "c", "extra_token_params": {"resource": "${RES}"}}`:                         "oauth.extra_token_params.resource",
		`{"client_id": "c", "audience": "${A:-x}"}`:                                                "oauth.audience",
		`"not an object"`: "oauth",
	} {
		if f, _, ok := Reference(withOAuth(raw)); !ok || f != want {
			t.Errorf("%s: Reference = %q %v, want %q", raw, f, ok, want)
		}
	}
	if f, v, ok := Reference(withOAuth(`{"grant_type": "authorization_code", "client_id": "public", "scope": "read"}`)); ok {
		t.Errorf("a block without references: %q %q", f, v)
	}
}

// TestExpandOAuthSyntaxError: an unsupported `${...}` form in an oauth
// field is an error naming the field (it was a type-assertion panic).
func TestExpandOAuthSyntaxError(t *testing.T) {
	_, err := ExpandOAuth(OAuth{ClientID: "c", Scope: "${X:=y}"}, "s", func(string) (string, bool) { return "", false })
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "mcpServers.s.oauth.scope: ") {
		t.Fatalf("ExpandOAuth with ${X:=y}: %v", err)
	}
	_, err = ExpandOAuth(OAuth{ClientID: "${CID:?set it}"}, "s", func(string) (string, bool) { return "", false })
	var me *MissingVarError
	if !errors.As(err, &me) || me.Var != "CID" || me.Message != "set it" || !strings.HasPrefix(err.Error(), "mcpServers.s.oauth.client_id: ") {
		t.Fatalf("ExpandOAuth with an unset ${CID:?set it}: %v", err)
	}
}
