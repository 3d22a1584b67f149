package catalogmcp

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth"
	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// TestOAuthCallbackNeedsConfirmation: the redirect back does not attach
// the token (login CSRF: whoever completes the upstream login may not be
// the Toolplane user who started Connect). It answers an interstitial
// naming the Toolplane user, tenant and server; only its POST, with the
// cookie it set and same-origin, attaches the token, once; a replayed,
// cookie-less, cross-site or tampered confirmation attaches nothing.
func TestOAuthCallbackNeedsConfirmation(t *testing.T) {
	e := newOAuthEnv(t, catalogconfig.Server{Name: "tracker", Type: catalogconfig.TypeHTTP, SessionScope: catalogconfig.ScopePerUser})
	e.waitState(t, "tracker", StateNeedsAuth)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gus := ScopeKey{Tenant: "globex", Subject: "gus<b>"}
	authURL, err := e.m.StartLogin(ctx, "tracker", gus.Tenant, gus.Subject)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	// alice completes gus's link in her browser.
	p, err := oauthtest.Consent(ctx, hc, authURL, "alice@example")
	if err != nil {
		t.Fatal(err)
	}
	if !p.NeedsConfirm() {
		t.Fatalf("callback answered %d without a confirmation page: %q", p.Status, p.Body)
	}
	for _, want := range []string{`<b id="subject">gus&lt;b&gt;</b>`, `<b id="tenant">globex</b>`, `<b id="server">tracker</b>`} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("interstitial lacks %s: %s", want, p.Body)
		}
	}
	if strings.Contains(p.Body, "gus<b>") || strings.Contains(p.Body, "http://") || strings.Contains(p.Body, "https://") {
		t.Errorf("interstitial has unescaped input or an external resource: %s", p.Body)
	}
	// Nothing is attached by the GET.
	if who, err := e.whoami(t, "tracker", gus); !errors.Is(err, catalogoauth.ErrNeedsAuth) {
		t.Fatalf("unconfirmed callback attached a token: whoami = %q, %v", who, err)
	}
	cookie := p.Cookies[0]
	if len(p.Cookies) != 1 || cookie.SameSite != http.SameSiteStrictMode || !cookie.HttpOnly {
		t.Fatalf("confirmation cookie: %+v", p.Cookies)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(p.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	post := func(f url.Values, origin string, cookies ...*http.Cookie) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.callback.URL+"/oauth/callback", strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for _, c := range cookies {
			req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	tampered := url.Values{}
	for k, v := range form {
		tampered[k] = v
	}
	tampered.Set("code", form.Get("code")+"x")
	for name, try := range map[string]func() (int, string){
		"no cookie":     func() (int, string) { return post(form, e.callback.URL) },
		"cross-site":    func() (int, string) { return post(form, "https://evil.example", cookie) },
		"tampered code": func() (int, string) { return post(tampered, e.callback.URL, cookie) },
	} {
		if st, body := try(); st == 200 || strings.Contains(body, "is connected") {
			t.Fatalf("%s: confirmation accepted: %d %s", name, st, body)
		}
		if who, err := e.whoami(t, "tracker", gus); !errors.Is(err, catalogoauth.ErrNeedsAuth) {
			t.Fatalf("%s: token attached: whoami = %q, %v", name, who, err)
		}
	}
	st, body, err := oauthtest.Confirm(ctx, hc, p)
	if err != nil || st != 200 || !strings.Contains(body, "tracker is connected for the Toolplane user gus&lt;b&gt; (tenant globex)") {
		t.Fatalf("confirm: %d %q %v", st, body, err)
	}
	if who, err := e.whoami(t, "tracker", gus); err != nil || who != "alice@example" {
		t.Fatalf("after confirm: whoami = %q, %v", who, err)
	}
	// A replayed confirmation is refused (the pending login is used).
	if st, body := post(form, e.callback.URL, cookie); st == 200 || !strings.Contains(body, "unknown, used or expired state") {
		t.Fatalf("replayed confirmation: %d %s", st, body)
	}
	// A replayed redirect back gets no new confirmation page.
	if st, body := post(url.Values{}, "", cookie); st == 200 {
		t.Fatalf("empty confirmation accepted: %s", body)
	}
	resp, err := hc.Get(p.URL.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatalf("replayed callback GET answered 200")
	}
}

// TestOAuthConfirmationExpires: a confirmation past ConfirmTTL is refused
// and attaches nothing.
func TestOAuthConfirmationExpires(t *testing.T) {
	m := NewManager(ManagerOptions{})
	defer m.Close()
	now := time.Now()
	tok := m.newConfirmation("S", "C", now)
	if err := m.checkConfirmation(tok, "S", "C", now); err != nil {
		t.Fatal(err)
	}
	if err := m.checkConfirmation(tok, "S", "C", now.Add(ConfirmTTL+time.Second)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired confirmation: %v", err)
	}
	if err := m.checkConfirmation(tok, "S2", "C", now); err == nil {
		t.Fatal("confirmation of another login accepted")
	}
	parts := strings.Split(tok, ".")
	forged := "9999999999." + parts[1] + "." + parts[2]
	if err := m.checkConfirmation(forged, "S", "C", now); err == nil {
		t.Fatal("confirmation with a forged expiry accepted")
	}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
