package runtimemcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// sessionRules answers the requests that must carry an Mcp-Session-Id
// (MCP streamable HTTP, "Session Management") and carry none, instead of
// mcp-go v1.2.1's answers (a GET opened an empty stream that never sent
// anything; a POST was 404 "Invalid session ID" as if the id had expired):
//
//   - GET without Mcp-Session-Id is 405 with `Allow: POST, DELETE`: the
//     front door serves streamable HTTP only, not the 2024-11-05 HTTP+SSE
//     transport, so an SSE-only client fails at once rather than waiting
//     for an endpoint event that never comes. A GET with a session id keeps
//     its stream (it carries unsolicited notifications such as list_changed).
//   - POST without Mcp-Session-Id on a session-based protocol version, other
//     than initialize, is 400 with a JSON-RPC error. A 2026-07-28 request
//     (sessionless; MCP-Protocol-Version header or `_meta`) passes, and so
//     does a batch (mcp-go answers it). An unknown or expired id stays 404.
func (s *Server) sessionRules(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerSessionID) != "" || mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) ||
			(!s.opts.DisableLocalhostProtection && rebinding(r)) {
			// (mcp-go refuses a DNS-rebinding request with 403 first.)
			h.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Allow", "POST, DELETE")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = io.WriteString(w, `{"error":"method_not_allowed","message":"GET /mcp needs an Mcp-Session-Id (the notification stream of a streamable HTTP session); this server does not serve the HTTP+SSE transport of 2024-11-05: POST an initialize request instead"}`)
			return
		case http.MethodPost:
		default:
			h.ServeHTTP(w, r)
			return
		}
		// guard already bounded the body (Options.MaxBodyBytes).
		body, err := io.ReadAll(io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
		_ = r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if int64(len(body)) > s.opts.MaxBodyBytes || mayLackSession(body) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(mcp.JSONRPCError{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      requestIDOf(body),
			Error: mcp.JSONRPCErrorDetails{
				Code:    mcp.INVALID_REQUEST,
				Message: "Bad Request: the Mcp-Session-Id header is required (send initialize first, or use protocol version " + mcp.ProtocolVersion20260728 + ")",
			},
		})
	})
}

// mayLackSession reports whether a POST body may come without a session
// id: initialize, a 2026-07-28 request (its `_meta` names the version), a
// batch, or a body that is not one JSON-RPC message (mcp-go answers it
// with the parse error it deserves).
func mayLackSession(body []byte) bool {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		return true
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(t, &m) != nil {
		return true
	}
	return m.Method == string(mcp.MethodInitialize) || mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion())
}

// requestIDOf is the JSON-RPC id of body (nil when it has none).
func requestIDOf(body []byte) mcp.RequestId {
	var m struct {
		ID mcp.RequestId `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	return m.ID
}

// rebinding reports what mcp-go's DNS-rebinding protection refuses: a
// request on a loopback connection whose Host header is not loopback.
func rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopback(local.String()) && !loopback(r.Host)
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
