package catalogconfig

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func oauthServer(block string) Server {
	return Server{Name: "notion", Type: TypeHTTP, URL: "https://mcp.example/mcp", Extra: []RawField{{Key: "oauth", Value: json.RawMessage(block)}}}
}

// TestParseOAuth: DeerFlow's block is read with its defaults; every bad
// input is an error naming the field; literal secrets are refused.
func TestParseOAuth(t *testing.T) {
	s := oauthServer(`{"enabled": true, "token_url": "https://auth.example/token", "client_id": "id",
		"client_secret": "${SECRET}", "scope": "a b", "refresh_skew_seconds": 30, "extra_token_params": {"tenant": "t"}}`)
	o, err := s.ParseOAuth()
	if err != nil {
		t.Fatal(err)
	}
	if o.EffectiveGrant() != GrantClientCredentials || o.RefreshSkew() != 30*time.Second || len(o.Scopes()) != 2 {
		t.Fatalf("%+v", o)
	}
	x, err := ExpandOAuth(*o, "notion", func(k string) (string, bool) { return "s3cret", k == "SECRET" })
	if err != nil || x.ClientSecret != "s3cret" || o.ClientSecret != "${SECRET}" {
		t.Fatalf("expand: %+v %v", x, err)
	}
	if _, err := ExpandOAuth(*o, "notion", func(string) (string, bool) { return "", false }); err == nil ||
		!strings.Contains(err.Error(), "mcpServers.notion.oauth.client_secret: environment variable SECRET is not set") {
		t.Fatalf("missing var: %v", err)
	}
	if o, err := (&Server{Name: "x", Type: TypeHTTP}).ParseOAuth(); o != nil || err != nil {
		t.Fatalf("no block: %v %v", o, err)
	}
	empty := oauthServer(`{}`)
	if o, _ := empty.ParseOAuth(); o.EffectiveGrant() != GrantAuthorizationCode {
		t.Fatalf("empty block grant %s", o.EffectiveGrant())
	}
	for _, c := range []struct{ block, want string }{
		{`{"token_url": "https://a/t", "client_id": "id", "client_secret": "literal"}`, "oauth.client_secret: must be a ${VAR} reference"},
		{`{"grant_type": "refresh_token", "token_url": "https://a/t", "refresh_token": "rt-literal"}`, "oauth.refresh_token: must be a ${VAR} reference"},
		{`{"grant_type": "refresh_token", "token_url": "https://a/t"}`, "oauth.refresh_token: required"},
		{`{"grant_type": "client_credentials", "client_id": "id", "client_secret": "$S"}`, "oauth.token_url: required"},
		{`{"token_url": "https://a/t", "client_secret": "$S"}`, "oauth.client_id: required"},
		{`{"token_url": "ftp://a/t", "client_id": "i", "client_secret": "$S"}`, "oauth.token_url: \"ftp://a/t\" is not an http(s) URL"},
		{`{"grant_type": "password"}`, "oauth.grant_type: \"password\""},
		{`{"token_url": 3}`, "oauth.token_url: want string"},
		{`{"tokenurl": "x"}`, "oauth.tokenurl: unknown key"},
		{`{"refresh_skew_seconds": -1}`, "oauth.refresh_skew_seconds: want 0..86400"},
		{`{"extra_token_params": {"api_key": "k"}}`, "oauth.extra_token_params.api_key: must be a ${VAR} reference"},
		{`[]`, "mcpServers.notion.oauth: not an object"},
	} {
		s := oauthServer(c.block)
		_, err := s.ParseOAuth()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.block, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "literal") {
			t.Errorf("%s: the error echoes the secret: %v", c.block, err)
		}
	}
	stdio := Server{Name: "s", Command: "npx", Extra: []RawField{{Key: "oauth", Value: json.RawMessage(`{}`)}}}
	if _, err := stdio.ParseOAuth(); err == nil || !strings.Contains(err.Error(), "only sse and http") {
		t.Errorf("stdio: %v", err)
	}
	// The whole block is masked in responses.
	m := Masked(oauthServer(`{"token_url": "https://a/t", "client_id": "id", "client_secret": "${S}"}`))
	if strings.Contains(string(m.Extra[0].Value), "${S}") || strings.Contains(string(m.Extra[0].Value), `:"id"`) {
		t.Errorf("masked block: %s", m.Extra[0].Value)
	}
}
