package catalogmcp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
)

// The OAuth callback does not attach a token on the redirect back: the
// person whose browser completes the upstream login may not be the
// Toolplane user who started the connection (login CSRF / account mix-up,
// docs/decisions/0127-oauth-callback-confirmation.md). The GET shows an
// interstitial naming the Toolplane user, tenant and server with a Confirm
// button; only the confirmed POST exchanges the code.

// ConfirmTTL is how long the interstitial's confirmation stays valid.
var ConfirmTTL = 5 * time.Minute

// confirmCookie carries the confirmation token to the POST (double submit):
// SameSite=Strict, so a cross-site form cannot send it.
const confirmCookie = "toolplane_oauth_confirm"

// maxConfirmForm bounds the confirmation POST's body.
const maxConfirmForm = 16 << 10

// confirmKeyValue returns the key confirmation tokens are MACed with:
// OAuthOptions.ConfirmKey, else a random key of this process.
func (m *Manager) confirmKeyValue() []byte {
	if o := m.opts.Options.OAuth; o != nil && len(o.ConfirmKey) > 0 {
		return o.ConfirmKey
	}
	m.confirmOnce.Do(func() {
		m.confirmKey = make([]byte, 32)
		_, _ = rand.Read(m.confirmKey)
	})
	return m.confirmKey
}

// confirmMAC binds a confirmation to the pending login (state), the code,
// the expiry and the nonce.
func (m *Manager) confirmMAC(state, code, exp, nonce string) string {
	h := hmac.New(sha256.New, m.confirmKeyValue())
	for _, p := range []string{"toolplane oauth confirm v1", state, code, exp, nonce} {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// newConfirmation returns a confirmation token for (state, code).
func (m *Manager) newConfirmation(state, code string, now time.Time) string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	exp := strconv.FormatInt(now.Add(ConfirmTTL).Unix(), 10)
	return exp + "." + nonce + "." + m.confirmMAC(state, code, exp, nonce)
}

// checkConfirmation verifies a confirmation token for (state, code).
func (m *Manager) checkConfirmation(tok, state, code string, now time.Time) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("confirm: malformed confirmation")
	}
	want := m.confirmMAC(state, code, parts[0], parts[1])
	if subtle.ConstantTimeCompare([]byte(want), []byte(parts[2])) != 1 {
		return errors.New("confirm: the confirmation does not match this login")
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || now.After(time.Unix(exp, 0)) {
		return errors.New("confirm: the confirmation expired; start the connection again")
	}
	return nil
}

// LoginOwner returns the server and the connection (tenant, subject; ""
// "" = the server's shared connection) a pending login's state belongs to,
// without using it.
func (m *Manager) LoginOwner(ctx context.Context, state string) (server, tenant, subject string, ok bool, err error) {
	if state == "" || len(state) > catalogoauth.MaxStateBytes {
		return "", "", "", false, nil
	}
	if o := m.opts.Options.OAuth; o != nil && o.LoginOwner != nil {
		server, tenant, subject, ok, err = o.LoginOwner(ctx, state)
		if err != nil || ok {
			return server, tenant, subject, ok, err
		}
	}
	m.mu.RLock()
	sups := append([]*Supervisor(nil), m.order...)
	m.mu.RUnlock()
	for _, s := range sups {
		if s.oauth == nil {
			continue
		}
		s.oauth.mu.Lock()
		for k, c := range s.oauth.clients {
			if c.HasPendingLogin(state) {
				s.oauth.mu.Unlock()
				return s.raw.Name, k[0], k[1], true, nil
			}
		}
		s.oauth.mu.Unlock()
	}
	return "", "", "", false, nil
}

// pageData is what the callback's pages show.
type pageData struct {
	Title, Message          string
	Server, Tenant, Subject string
	Shared                  bool
	State, Code, Confirm    string
}

var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="same-origin">
<title>Toolplane: {{.Title}}</title></head>
<body>
<h1>{{.Title}}</h1>
{{if .Confirm}}<p>You are connecting the MCP server <b id="server">{{.Server}}</b> for
{{if .Shared}}<b>all users</b> (the server's shared connection, started by an administrator{{if .Tenant}} of tenant <b id="tenant">{{.Tenant}}</b>{{end}}).{{else}}the Toolplane user <b id="subject">{{.Subject}}</b> of tenant <b id="tenant">{{.Tenant}}</b>.{{end}}</p>
<p>The account you just signed in with upstream will act for that Toolplane user.
If you did not start this connection yourself in Toolplane, do not confirm: close this page.</p>
<form method="post" action="callback" id="toolplane-confirm">
<input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="code" value="{{.Code}}">
<input type="hidden" name="confirm" value="{{.Confirm}}">
<button type="submit">Confirm: connect {{.Server}}</button>
</form>
{{else}}<p id="message">{{.Message}}</p>{{end}}
</body></html>
`))

// writePage writes a callback page with headers that keep it out of
// frames, caches and referrers and allow no external resource.
func writePage(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer browsers send
	// "Origin: null" on the Confirm POST.
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_ = callbackPage.Execute(w, d)
}

// who names the connection for the pages.
func who(server, tenant, subject string) string {
	if subject == "" {
		return fmt.Sprintf("%s is connected (the shared connection, for every user).", server)
	}
	return fmt.Sprintf("%s is connected for the Toolplane user %s (tenant %s). You can close this page.", server, subject, tenant)
}

// ServeOAuthCallback serves server.public_url + /oauth/callback: GET is the
// redirect back (serveCallback), POST the interstitial's Confirm
// (ServeOAuthConfirm); other methods are refused.
func (m *Manager) ServeOAuthCallback(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		m.serveCallback(w, r)
	case http.MethodPost:
		m.ServeOAuthConfirm(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// serveCallback serves GET server.public_url + /oauth/callback: the
// authorization server redirects the user's browser here with code and
// state. A pending login's callback answers the confirmation interstitial;
// nothing is attached. An error answer from the authorization server ends
// the login. The pages never echo a token; the code is only in the form.
func (m *Manager) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("error") != "" {
		_, err := m.CompleteLogin(r.Context(), q)
		if err == nil {
			err = errors.New("oauth callback: the authorization server refused the login")
		}
		writePage(w, http.StatusBadRequest, pageData{Title: "not connected", Message: "The connection was not authorised: " + err.Error()})
		return
	}
	state, code := q.Get("state"), q.Get("code")
	server, tenant, subject, ok, err := m.LoginOwner(r.Context(), state)
	switch {
	case err != nil:
		writePage(w, http.StatusInternalServerError, pageData{Title: "not connected", Message: "The connection was not authorised: " + err.Error()})
		return
	case !ok:
		writePage(w, http.StatusBadRequest, pageData{Title: "not connected", Message: "The connection was not authorised: oauth callback: unknown, used or expired state"})
		return
	case code == "" || len(code) > 4096:
		writePage(w, http.StatusBadRequest, pageData{Title: "not connected", Message: "The connection was not authorised: oauth callback: code: missing or too long"})
		return
	}
	tok := m.newConfirmation(state, code, time.Now())
	http.SetCookie(w, &http.Cookie{Name: confirmCookie, Value: tok, Path: m.callbackPath(r), MaxAge: int(ConfirmTTL / time.Second),
		HttpOnly: true, Secure: m.callbackSecure(r), SameSite: http.SameSiteStrictMode})
	writePage(w, http.StatusOK, pageData{Title: "confirm the connection of " + server, Server: server, Tenant: tenant, Subject: subject,
		Shared: subject == "", State: state, Code: code, Confirm: tok})
}

// callbackPath is the callback's path as browsers see it (public_url may
// have a prefix a proxy strips): the confirmation cookie's Path.
func (m *Manager) callbackPath(r *http.Request) string {
	if o := m.opts.Options.OAuth; o != nil && o.RedirectURI != "" {
		if u, err := url.Parse(o.RedirectURI); err == nil && u.Path != "" {
			return u.Path
		}
	}
	return r.URL.Path
}

// callbackSecure: the callback is served over https (the cookie is Secure).
func (m *Manager) callbackSecure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if o := m.opts.Options.OAuth; o != nil {
		return strings.HasPrefix(o.RedirectURI, "https://")
	}
	return false
}

// sameOrigin refuses a POST a browser marks as cross-site: Sec-Fetch-Site
// other than same-origin, or an Origin other than the callback's.
func (m *Manager) sameOrigin(r *http.Request) error {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return fmt.Errorf("confirm: cross-site request (Sec-Fetch-Site %s)", s)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	o := m.opts.Options.OAuth
	if o == nil || o.RedirectURI == "" {
		return errors.New("confirm: no callback URL is configured")
	}
	u, err := url.Parse(o.RedirectURI)
	if err != nil || !strings.EqualFold(origin, u.Scheme+"://"+u.Host) {
		return errors.New("confirm: cross-origin request")
	}
	return nil
}

// ServeOAuthConfirm serves POST server.public_url + /oauth/callback: the
// interstitial's Confirm. The confirmation must match the cookie set with
// the interstitial, the pending login and the code, and be unexpired; the
// pending login is then used (once: a replayed confirmation finds no
// pending login) and the code exchanged.
func (m *Manager) ServeOAuthConfirm(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, err error) {
		writePage(w, status, pageData{Title: "not connected", Message: "The connection was not authorised: " + err.Error()})
	}
	if err := m.sameOrigin(r); err != nil {
		fail(http.StatusForbidden, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxConfirmForm)
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, errors.New("confirm: unreadable form"))
		return
	}
	state, code, tok := r.PostForm.Get("state"), r.PostForm.Get("code"), r.PostForm.Get("confirm")
	c, err := r.Cookie(confirmCookie)
	if tok == "" || err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(tok)) != 1 {
		fail(http.StatusForbidden, errors.New("confirm: the confirmation is missing or not this browser's; open the login link again"))
		return
	}
	if err := m.checkConfirmation(tok, state, code, time.Now()); err != nil {
		fail(http.StatusForbidden, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: confirmCookie, Value: "", Path: m.callbackPath(r), MaxAge: -1, HttpOnly: true,
		Secure: m.callbackSecure(r), SameSite: http.SameSiteStrictMode})
	server, tenant, subject, ok, err := m.LoginOwner(r.Context(), state)
	if err != nil {
		fail(http.StatusInternalServerError, err)
		return
	}
	if !ok {
		fail(http.StatusBadRequest, errors.New("oauth callback: unknown, used or expired state"))
		return
	}
	got, err := m.CompleteLogin(r.Context(), url.Values{"state": {state}, "code": {code}})
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	if got != server {
		server, tenant, subject = got, "", ""
	}
	writePage(w, http.StatusOK, pageData{Title: server + " connected", Message: "Toolplane: " + who(server, tenant, subject)})
}
