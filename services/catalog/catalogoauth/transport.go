package catalogoauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/client/transport"
)

// maxStepUps bounds the insufficient_scope re-authorisations of one request
// (MCP 2025-11-25 §"Scope Challenge Handling": clients should limit retries).
const maxStepUps = 2

// maxReplayBody bounds the request body kept to resend after a 401.
const maxReplayBody = 32 << 20

// Transport applies a Client's token to every request (Authorization:
// Bearer) and handles the server's answers: a 401 is met with discovery and
// a refresh or a login, a 403 insufficient_scope with a step-up login for
// the larger scope set; the request is then sent again once.
type Transport struct {
	// Client supplies the tokens.
	Client *Client
	// Base sends the requests (nil = http.DefaultTransport).
	Base http.RoundTripper
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var body []byte
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxReplayBody {
			return nil, fmt.Errorf("request body larger than %d bytes", maxReplayBody)
		}
		body = b
	}
	clone := func() (*http.Request, error) {
		r := req.Clone(ctx)
		switch {
		case req.GetBody != nil:
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = b
		case body != nil:
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		return r, nil
	}
	refreshed, loggedIn, stepUps := false, false, 0
	for {
		tok, err := t.Client.Token(ctx)
		if err != nil {
			return nil, err
		}
		r, err := clone()
		if err != nil {
			return nil, err
		}
		if tok != nil {
			r.Header.Set("Authorization", authorization(tok))
		}
		resp, err := t.base().RoundTrip(r)
		if err != nil {
			return nil, err
		}
		ch, _ := BearerChallenge(resp.Header.Values("WWW-Authenticate"))
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			// A token was sent and refused: refresh it once; none, or the
			// refresh did not help: discover and get a new one.
			if tok != nil && !refreshed && (tok.RefreshToken != "" || t.Client.cfg.Grant != GrantAuthorizationCode) {
				refreshed = true
				drain(resp)
				if _, err := t.Client.discover(ctx, &ch); err != nil {
					return nil, err
				}
				if _, err := t.Client.renew(ctx, tok); err != nil {
					return nil, err
				}
				continue
			}
			if loggedIn || req.Method == http.MethodDelete {
				// A session's DELETE is not worth a login.
				return resp, nil
			}
			loggedIn = true
			drain(resp)
			if err := t.Client.obtain(ctx, &ch, tok); err != nil {
				return nil, err
			}
			continue
		case resp.StatusCode == http.StatusForbidden && ch.Error() == "insufficient_scope":
			if stepUps >= maxStepUps || t.Client.cfg.Grant != GrantAuthorizationCode || !t.Client.widens(ch.Scope(), tok) {
				return resp, nil
			}
			stepUps++
			drain(resp)
			if err := t.Client.Login(ctx, &ch); err != nil {
				return nil, err
			}
			continue
		}
		return resp, nil
	}
}

// obtain gets a first token after a 401: the machine grant, or a login.
func (c *Client) obtain(ctx context.Context, ch *Challenge, old *transport.Token) error {
	if _, err := c.discover(ctx, ch); err != nil {
		return err
	}
	switch c.cfg.Grant {
	case GrantClientCredentials, GrantRefreshToken:
		_, err := c.renew(ctx, old)
		return err
	}
	// Another request may have logged in meanwhile.
	if cur, err := c.stored(ctx); err == nil && cur != nil && (old == nil || cur.AccessToken != old.AccessToken) {
		return nil
	}
	return c.Login(ctx, ch)
}

// widens reports whether the scopes a challenge asks for include one not yet
// requested or granted: only then can a new login help.
func (c *Client) widens(want []string, tok *transport.Token) bool {
	c.mu.Lock()
	have := append([]string(nil), c.requested...)
	c.mu.Unlock()
	if tok != nil {
		have = append(have, strings.Fields(tok.Scope)...)
	}
	for _, s := range want {
		if !slices.Contains(have, s) {
			return true
		}
	}
	return false
}

func authorization(t *transport.Token) string {
	typ := t.TokenType
	if typ == "" || strings.EqualFold(typ, "bearer") {
		typ = "Bearer"
	}
	return typ + " " + t.AccessToken
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// IsNeedsAuth reports whether err (from a connection or a call) means the
// server needs an authorisation.
func IsNeedsAuth(err error) bool { return errors.Is(err, ErrNeedsAuth) }
