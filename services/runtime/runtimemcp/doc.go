// Package runtimemcp is the runtime's MCP front door: an MCP server (mcp-go
// v1.2.1) whose tools are exactly what the runtime binds for one thread, so
// an MCP client (an IDE, the official inspector, another agent framework)
// gets Toolplane's deferral, authorization, skill policy and output budget
// without speaking gRPC (docs/architecture.md §1, docs/architecture.md §3.1–§3.2).
//
// It is a client of RuntimeService and nothing else: it never opens a data
// directory, so `toolplane mcp` (stdio) can front a running suite while the
// suite's own HTTP listener serves the same handler at /mcp.
//
// # Protocol versions
//
// Everything mcp-go v1.2.1 offers: 2026-07-28 (sessionless "modern" era, no
// initialize handshake, server/discover), and the session-based revisions
// 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05 (see mcp.ValidProtocolVersions).
//
// # Threads
//
// Every MCP request is served on one runtime thread, chosen in this order:
//
//  1. The thread the client names: the `_meta` key MetaThreadKey
//     ("toolplane.dev/thread") of the request, else the HTTP header
//     HeaderThread ("Toolplane-Thread"). The runtime checks ownership: another
//     principal's thread is NOT_FOUND.
//  2. With a session-based protocol version, the MCP session's thread: created
//     on the first request of the session (normally initialize) and kept for
//     the session's life. The binding is keyed by session id and credential,
//     so a session id replayed with another credential gets nothing of the
//     owner's. Over stdio the process is one session.
//  3. Otherwise (sessionless requests without a named thread) one stable
//     thread per (credential, agent): found again after a restart of the front
//     door through the thread metadata MetadataBinding = "stable" and
//     MetadataAgent = agent — never a fresh thread per request, which would
//     lose every promotion.
//
// # HTTP
//
// Streamable HTTP only (no 2024-11-05 HTTP+SSE transport): a GET without
// Mcp-Session-Id is 405 with `Allow: POST, DELETE`, a session-based POST
// without it (other than initialize) is 400, an unknown or expired id is
// 404 (sessionrules.go).
//
// # Principal and agent
//
// Over HTTP the caller's Authorization header is forwarded to the runtime on
// every call (the front door holds no credential of its own). Before that,
// every request passes the guard (guard.go; docs/architecture.md §5): an
// Origin not in Options.AllowedOrigins is 403; with Options.Verifier (the
// suite's authenticator, when auth is on) the credential is verified on
// every POST, GET and DELETE — missing or invalid is 401 with
// `WWW-Authenticate: Bearer` — and a request naming an Mcp-Session-Id must
// come from the principal that created the session (else 404, as for an
// unknown session); a POST body over Options.MaxBodyBytes is 413.
// Over stdio the runtime credential of `toolplane mcp` is used. The agent profile of new threads is the HTTP header HeaderAgent
// ("Toolplane-Agent") or the `agent` query parameter, else Options.Agent, else
// the runtime's default agent.
//
// # Tools
//
//   - tools/list returns AssembleToolsResponse.tools of the thread: tool_search,
//     the non-deferred tools and the promoted ones, with their input schemas
//     untouched. The deferred names reach the client through tool_search's
//     description and the server instructions (initialize / server/discover).
//   - tools/call runs RuntimeService.ExecuteToolCallStream, so authorization,
//     skill policy, the deferred filter, the output budget and the error kinds
//     apply: a failed call is a result with isError=true and the runtime's
//     text; `_meta` carries MetaErrorKind and MetaReasonCode. Progress
//     notifications from the upstream tool are relayed with the client's own
//     progressToken (dropped when the client sent none); logging notifications
//     are relayed at or above the level the session set with logging/setLevel
//     (all of them when it set none) and, with 2026-07-28, only for a request
//     that declared a log level (SEP-2575).
//   - notifications/tools/list_changed reaches a session-based session that
//     listed its tools, and a 2026-07-28 client on its subscriptions/listen
//     stream when it asked for tool changes (SEP-2575), when a call on its
//     thread promoted tools (tool_search) and when a catalog change upstream
//     alters what its thread binds (Options.Catalog is watched; the thread is
//     re-assembled with the subscriber's credential and compared with what
//     it last saw, so a change elsewhere sends nothing) — notify.go.
//
// # Resources, prompts and completion
//
// With Options.Catalog and Options.Authz (features.go;
// docs/decisions/0161-front-door-resources-and-prompts.md): resources/list,
// resources/templates/list and prompts/list return the catalog's lists
// (ListResources, ListResourceTemplates, ListPrompts) filtered by authz for
// the request's principal (mcp_server, then resource / prompt, action list);
// resources/read, resources/subscribe, prompts/get and completion/complete
// are decided by authz (action call) and relayed to the owning server by the
// catalog, on the session scope of the request's thread. Subscriptions send
// notifications/resources/updated to the session (or, with 2026-07-28, on
// the subscriptions/listen stream that named the URIs); list changes send
// notifications/resources/list_changed and prompts/list_changed to every
// session. When a session ends, its subscriptions end and the catalog closes
// its thread's per-thread MCP sessions (CloseThreadSessions).
//
// A requested resource URI is normalised first (urinorm.go: unreserved
// percent-decoding, RFC 3986 §5.2.4 dot segments, also inside the
// toolplane+mcp form), and the policy and the catalog see that form.
// Resources inside results (embedded resources and resource links of
// prompts/get, other URIs among resources/read contents) are decided like
// resources/read (embedded.go): a denied one is replaced by the text
// "resource withheld by policy" (prompts) or removed (read contents). A
// thread named with HeaderThread is checked with the runtime (GetThread,
// the caller's credential) before it becomes the trusted CallContext;
// another principal's thread gets the unknown thread's answer.
package runtimemcp
