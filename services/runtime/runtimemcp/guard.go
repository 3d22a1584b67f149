package runtimemcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/internal/auth"
)

// Verifier verifies the bearer credential of a request (the suite's
// *auth.Authenticator): Credential reads the `authorization` incoming
// metadata of ctx and returns the caller, or an UNAUTHENTICATED error.
type Verifier interface {
	Credential(ctx context.Context) (auth.Identity, error)
}

// DefaultMaxBodyBytes is the default bound of a POST body on the front
// door (server.http.mcp_max_body_bytes): the runtime's raw_arguments bound
// (4 MiB) plus room for the JSON-RPC envelope.
const DefaultMaxBodyBytes = 4<<20 + 64<<10

// headerSessionID is the streamable HTTP session header (MCP 2025-03-26+).
const headerSessionID = "Mcp-Session-Id"

// principalKeyOf is the key of a verified principal: tenant and subject,
// each length-prefixed, so that no value can make two principals' keys
// equal (docs/architecture.md §5).
func principalKeyOf(id auth.Identity) string {
	p := id.Principal
	t, s := p.GetTenant(), p.GetSubject()
	if t == "" {
		t = "default"
	}
	return "p" + strconv.Itoa(len(t)) + ":" + t + strconv.Itoa(len(s)) + ":" + s
}

// fullCredentialKey is the key of an unverified Authorization value (no
// Verifier: auth off, or a front door in front of a remote runtime that
// verifies it itself).
func fullCredentialKey(authorization string) string {
	sum := sha256.Sum256([]byte(authorization))
	return "c" + hex.EncodeToString(sum[:])
}

type ownerKey struct{}

// ownerFrom is the key of the request's owner (principal or credential),
// set by guard; "" outside an HTTP request (stdio).
func ownerFrom(ctx context.Context) string {
	s, _ := ctx.Value(ownerKey{}).(string)
	return s
}

// guard checks every HTTP request before mcp-go sees it
// (docs/architecture.md §5, "MCP front door"), in this order:
//
//  1. Origin: a request carrying an Origin header that is neither
//     same-origin (its host:port is the request's Host) nor in
//     Options.AllowedOrigins is 403 (MCP streamable HTTP, "Security
//     warning"); tools that send no Origin pass. A same-origin request from
//     a rebound DNS name still meets the Host check that follows
//     (sessionrules.go, mcp-go's localhost protection).
//  2. Credential: with a Verifier, the bearer credential is verified on
//     every request (POST, GET, DELETE); missing or invalid is 401 with a
//     `WWW-Authenticate: Bearer` challenge (RFC 6750 §3; with
//     `resource_metadata` when Options.ResourceMetadataURL is set, RFC
//     9728 §5.1). Without a Verifier but with RequireAuthorization, a
//     request without an Authorization header is 401.
//  3. Session: a request naming an Mcp-Session-Id must come from the
//     principal that created the session; another principal's or an
//     unknown session id is 404 like a session that ended, so a session id
//     alone never authorizes anything and ids do not leak. A response that
//     mints a session id binds it to the caller.
//  4. Body: a POST body over Options.MaxBodyBytes is 413 naming the limit,
//     refused from Content-Length before a byte is read, else after
//     reading at most limit+1 bytes.
//  5. Sessions per principal: a request that would open a session (POST
//     initialize, GET without a session id) beyond
//     Options.MaxSessionsPerPrincipal ends the principal's least recently
//     used idle session first, and is 429 naming the limit when every one
//     of them has a request in flight (sessioncap.go).
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(s.opts.AllowedOrigins, o) && !sameOrigin(o, r.Host) {
			s.refuse(w, r, http.StatusForbidden, "origin_not_allowed", "Origin "+strconv.Quote(o)+" is not in server.http.mcp_allowed_origins")
			return
		}
		if r.Method == http.MethodOptions {
			h.ServeHTTP(w, r)
			return
		}
		authz := r.Header.Get("Authorization")
		owner := fullCredentialKey(authz)
		switch {
		case s.opts.Verifier != nil:
			md := metadata.MD{}
			if authz != "" {
				md.Set("authorization", authz)
			}
			id, err := s.opts.Verifier.Credential(metadata.NewIncomingContext(r.Context(), md))
			if err != nil {
				s.challenge(w, r, authz != "", status.Convert(err).Message())
				return
			}
			owner = principalKeyOf(id)
		case s.opts.RequireAuthorization && authz == "":
			s.challenge(w, r, false, "the MCP front door needs an Authorization: Bearer token")
			return
		}
		sid := r.Header.Get(headerSessionID)
		if sid != "" {
			if o, ok := s.owners.Get(sid); !ok || o != owner {
				// mcp-go's own answer to an unknown session (404), so a
				// client starts a new session with its credential.
				s.refuse(w, r, http.StatusNotFound, "session_not_found", "Invalid session ID")
				return
			}
		}
		var body []byte
		if r.Method == http.MethodPost && r.Body != nil {
			limit := s.opts.MaxBodyBytes
			if r.ContentLength > limit {
				s.tooLarge(w, r, limit)
				return
			}
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			_ = r.Body.Close()
			if err != nil {
				s.refuse(w, r, http.StatusBadRequest, "body_unreadable", "request body could not be read")
				return
			}
			if int64(len(body)) > limit {
				s.tooLarge(w, r, limit)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// 5. Sessions per principal (sessioncap.go).
		switch {
		case createsSession(r, body):
			evict, release, ok := s.caps.admit(owner)
			if !ok {
				s.tooManySessions(w, r)
				return
			}
			defer release()
			if evict != "" {
				evictSession(h, r, evict)
			}
		case sid != "":
			defer s.caps.begin(sid)()
		}
		r = r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner))
		bw := &bindingWriter{ResponseWriter: w, s: s, owner: owner, had: sid != ""}
		h.ServeHTTP(bw, r)
		if bw.minted != "" {
			s.caps.end(bw.minted)
		}
		if r.Method == http.MethodDelete && sid != "" && bw.code == http.StatusOK {
			s.owners.Remove(sid)
		}
	})
}

// challenge answers 401 with a Bearer challenge: without error attribute
// when the request carried no credential (RFC 6750 §3.1), with
// error="invalid_token" when it carried one that failed.
func (s *Server) challenge(w http.ResponseWriter, r *http.Request, presented bool, msg string) {
	c := `Bearer realm="toolplane"`
	if presented {
		c += `, error="invalid_token"`
	}
	if u := s.opts.ResourceMetadataURL; u != "" {
		c += `, resource_metadata="` + u + `"`
	}
	w.Header().Set("WWW-Authenticate", c)
	if s.opts.OnRefusal != nil {
		s.opts.OnRefusal(r, http.StatusUnauthorized, "unauthenticated")
	}
	writeRefusal(w, http.StatusUnauthorized, "unauthenticated", msg)
}

func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	s.refuse(w, r, http.StatusRequestEntityTooLarge, "body_too_large",
		fmt.Sprintf("request body is larger than server.http.mcp_max_body_bytes (%d bytes)", limit))
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	if s.opts.OnRefusal != nil {
		s.opts.OnRefusal(r, code, reason)
	}
	writeRefusal(w, code, reason, msg)
}

func writeRefusal(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": reason, "message": msg})
}

// bindingWriter binds a session id minted by the response (initialize, a
// GET without a session) to the request's owner before the client can see
// it.
type bindingWriter struct {
	http.ResponseWriter
	s      *Server
	owner  string
	had    bool
	code   int
	minted string // the session id this response minted
}

func (b *bindingWriter) bind() {
	if b.code != 0 {
		return
	}
	b.code = http.StatusOK
	if sid := b.Header().Get(headerSessionID); sid != "" && !b.had {
		b.s.owners.Add(sid, b.owner)
		b.s.caps.bind(b.owner, sid)
		b.minted = sid
	}
}

// WriteHeader implements http.ResponseWriter.
func (b *bindingWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.bind()
		b.code = code
	}
	b.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (b *bindingWriter) Write(p []byte) (int, error) {
	b.bind()
	return b.ResponseWriter.Write(p)
}

// Flush implements http.Flusher (SSE responses).
func (b *bindingWriter) Flush() {
	b.bind()
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (b *bindingWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// newOwners is the session → owner table, bounded like the thread
// bindings: an evicted entry makes its session unusable (404, the client
// re-initializes), never usable by anyone else.
func newOwners() *lru.Cache[string, string] {
	c, _ := lru.New[string, string](bindingCap)
	return c
}

// sameOrigin reports whether origin (scheme://host[:port]) names the host
// the request was sent to (Host header), compared case-insensitively with
// the scheme's default port made explicit on both sides.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || host == "" {
		return false
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	withPort := func(h string) string {
		if _, _, err := net.SplitHostPort(h); err == nil {
			return strings.ToLower(h)
		}
		return strings.ToLower(net.JoinHostPort(strings.Trim(h, "[]"), def))
	}
	return withPort(u.Host) == withPort(host)
}
