package runtimemcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// DefaultMaxSessionsPerPrincipal is the default cap of live MCP sessions
// one principal (or, without a Verifier, one credential) holds on the HTTP
// front door (server.http.mcp_max_sessions_per_principal).
const DefaultMaxSessionsPerPrincipal = 16

// sessionCap counts the live MCP sessions of each owner (guard.go's key of
// the principal or credential) and the requests in flight on each, so that
// a new session beyond the cap first evicts the owner's least recently used
// idle session (no request in flight, e.g. no open GET stream) and is
// refused only when every session of the owner is busy
// (docs/architecture.md §5, "MCP front door").
type sessionCap struct {
	max int

	mu      sync.Mutex
	owners  map[string]*ownerSessions
	ownerOf map[string]string // session id → owner
}

type ownerSessions struct {
	pending  int // session-creating requests admitted, not yet bound
	sessions map[string]*capEntry
}

type capEntry struct {
	last     time.Time
	inflight int
}

func newSessionCap(max int) *sessionCap {
	return &sessionCap{max: max, owners: map[string]*ownerSessions{}, ownerOf: map[string]string{}}
}

func (c *sessionCap) ownerLocked(owner string) *ownerSessions {
	o := c.owners[owner]
	if o == nil {
		o = &ownerSessions{sessions: map[string]*capEntry{}}
		c.owners[owner] = o
	}
	return o
}

// admit reserves a slot for a request that may create a session. It
// returns the session to evict first ("" for none) and ok=false when the
// owner is at the cap with every session busy. release must be called when
// the request ends (bind turns the reservation into a session first).
func (c *sessionCap) admit(owner string) (evict string, release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.ownerLocked(owner)
	if len(o.sessions)+o.pending >= c.max {
		var oldest time.Time
		for sid, e := range o.sessions {
			if e.inflight == 0 && (evict == "" || e.last.Before(oldest)) {
				evict, oldest = sid, e.last
			}
		}
		if evict == "" {
			return "", nil, false
		}
		c.removeLocked(evict)
	}
	o.pending++
	var once sync.Once
	return evict, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if o := c.owners[owner]; o != nil {
				o.pending--
				c.gcLocked(owner, o)
			}
		})
	}, true
}

// bind records sid, minted by a request admit let through, as owner's.
func (c *sessionCap) bind(owner, sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ownerOf[sid]; ok {
		return
	}
	o := c.ownerLocked(owner)
	o.sessions[sid] = &capEntry{last: time.Now(), inflight: 1} // the minting request is in flight
	c.ownerOf[sid] = owner
}

// begin marks a request on sid in flight; the returned func ends it.
func (c *sessionCap) begin(sid string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entryLocked(sid)
	if e == nil {
		return func() {}
	}
	e.inflight++
	e.last = time.Now()
	return func() { c.end(sid) }
}

func (c *sessionCap) end(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entryLocked(sid); e != nil && e.inflight > 0 {
		e.inflight--
		e.last = time.Now()
	}
}

func (c *sessionCap) entryLocked(sid string) *capEntry {
	owner, ok := c.ownerOf[sid]
	if !ok {
		return nil
	}
	return c.owners[owner].sessions[sid]
}

// remove forgets sid (ended, deleted, swept or evicted).
func (c *sessionCap) remove(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(sid)
}

func (c *sessionCap) removeLocked(sid string) {
	owner, ok := c.ownerOf[sid]
	if !ok {
		return
	}
	delete(c.ownerOf, sid)
	o := c.owners[owner]
	delete(o.sessions, sid)
	c.gcLocked(owner, o)
}

func (c *sessionCap) gcLocked(owner string, o *ownerSessions) {
	if o.pending <= 0 && len(o.sessions) == 0 {
		delete(c.owners, owner)
	}
}

// count is the owner's live sessions (for tests).
func (c *sessionCap) count(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owners[owner]; o != nil {
		return len(o.sessions)
	}
	return 0
}

// createsSession reports whether r may mint an MCP session: a GET without a
// session id (mcp-go opens a session for its stream) or a POST carrying an
// initialize request. body is the POST body guard has read.
func createsSession(r *http.Request, body []byte) bool {
	if r.Header.Get(headerSessionID) != "" {
		return false
	}
	switch r.Method {
	case http.MethodGet:
		return true
	case http.MethodPost:
		return isInitialize(body)
	}
	return false
}

func isInitialize(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return false
	}
	type msg struct {
		Method string `json:"method"`
	}
	if body[0] == '[' {
		var batch []msg
		if json.Unmarshal(body, &batch) != nil {
			return false
		}
		for _, m := range batch {
			if m.Method == "initialize" {
				return true
			}
		}
		return false
	}
	var m msg
	return json.Unmarshal(body, &m) == nil && m.Method == "initialize"
}

// evictSession ends sid in mcp-go (as a DELETE would: its streams close,
// OnUnregisterSession drops its bindings), so an evicted session frees its
// memory at once and its id answers 404 from then on.
func evictSession(h http.Handler, r *http.Request, sid string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodDelete, r.URL.String(), nil)
	if err != nil {
		return
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	req.Header.Set(headerSessionID, sid)
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		req.Header.Set("Mcp-Protocol-Version", v)
	}
	h.ServeHTTP(discardWriter{h: http.Header{}}, req)
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}

func (s *Server) tooManySessions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "5")
	s.refuse(w, r, http.StatusTooManyRequests, "too_many_sessions",
		fmt.Sprintf("this principal holds %d MCP sessions, each with a request in flight (server.http.mcp_max_sessions_per_principal); end one (DELETE) or retry later", s.opts.MaxSessionsPerPrincipal))
}
