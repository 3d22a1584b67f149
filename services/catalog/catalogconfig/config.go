// Package catalogconfig reads, validates, masks and atomically rewrites the
// catalog's extensions_config.json: the MCP server list in the format of
// DeerFlow and Claude Desktop (`mcpServers`), docs/deerflow.md §5.1.
//
// Compatibility and the places where Toolplane deliberately differs from
// DeerFlow:
//   - servers keep their config-file order (the order decides name collisions,
//     docs/architecture.md §7);
//   - unknown top-level keys and unknown per-server keys survive a rewrite
//     byte for byte;
//   - `$VAR` and `${VAR}` expand anywhere inside a string (DeerFlow only
//     expands a whole-string `$VAR`, DeerFlow issue #2855), with the POSIX
//     forms `${VAR:-default}`, `${VAR-default}`, `${VAR:+alt}`, `${VAR+alt}`,
//     `${VAR:?message}` and `${VAR?message}`; `$$` is a literal `$`; a
//     missing variable fails only the server that uses it (see Expand);
//   - Claude Desktop's `"disabled": true` and DeerFlow's `"enabled": false`
//     both disable a server; Windsurf's / Cursor's `serverUrl` is a
//     streamable-HTTP `url`;
//   - every per-server key Toolplane does not understand is reported
//     (Server.Warnings, logged at load and shown in ListServers), never
//     ignored silently;
//   - a `static` server type loads tool definitions from a JSON or JSONL file.
package catalogconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Transport types of a server (the `type` key, or its alias `transport`).
const (
	TypeStdio  = "stdio"
	TypeSSE    = "sse"
	TypeHTTP   = "http"
	TypeStatic = "static"
)

// Session scopes (the `session_scope` key): which callers share one MCP child
// or session of a server.
const (
	// ScopeShared is the default: one child per server, concurrent calls multiplexed.
	ScopeShared = "shared"
	// ScopePerUser gives each (tenant, subject) its own child.
	ScopePerUser = "per_user"
	// ScopePerThread gives each (tenant, subject, thread id) its own child.
	ScopePerThread = "per_thread"
	// ScopePerTenant gives each tenant its own child, shared by its users.
	ScopePerTenant = "per_tenant"
	// WorkingDirThread is `working_dir: thread`: the per-thread child runs
	// in the thread's workspace.
	WorkingDirThread = "thread"
)

// Values of `pin_new_tools` (docs/architecture.md §7): a new tool of a
// pinned server is pinned as first seen (allow) or waits for review.
const (
	PinNewAllow  = "allow"
	PinNewReview = "review"
)

// Routing modes (docs/deerflow.md §2.8).
const (
	RoutingOff    = "off"
	RoutingPrefer = "prefer"
)

// DefaultSessionInitTimeout is the default `session_init_timeout` (docs/deerflow.md §5.1).
const DefaultSessionInitTimeout = 60 * time.Second

// File is a parsed extensions_config.json. Servers are in file order; every
// other top-level key is kept raw in Extra and written back unchanged.
type File struct {
	// Servers in config-file order.
	Servers []Server
	// Extra holds every top-level key other than mcpServers, raw, in file order.
	Extra []RawField
}

// RawField is one JSON object member kept verbatim.
type RawField struct {
	Key   string
	Value json.RawMessage
}

// Server is one entry of mcpServers, as written in the file (placeholders such
// as `${TOKEN}` unexpanded). Pointer fields distinguish "absent" from zero.
type Server struct {
	// Name is the mcpServers key.
	Name string `json:"-"`
	// Enabled defaults to true when nil (DeerFlow's key).
	Enabled *bool `json:"enabled,omitempty"`
	// Disabled is Claude Desktop's spelling: `"disabled": true` disables the
	// server. Either key disables it (see IsEnabled).
	Disabled *bool `json:"disabled,omitempty"`
	// Type is stdio | sse | http | static ("" = inferred, see EffectiveType).
	Type string `json:"type,omitempty"`
	// Transport is the MCP-spec alias of Type, used when Type is empty.
	Transport string `json:"transport,omitempty"`
	// Command is the stdio executable.
	Command string `json:"command,omitempty"`
	// Args are the stdio arguments.
	Args []string `json:"args,omitempty"`
	// Env is added to the child's environment (secret: masked in responses).
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the child's working directory.
	Cwd string `json:"cwd,omitempty"`
	// URL is the sse/http endpoint.
	URL string `json:"url,omitempty"`
	// ServerURL is Windsurf's and Cursor's spelling of a streamable-HTTP
	// `url`; it is used when URL is empty (see EffectiveURL).
	ServerURL string `json:"serverUrl,omitempty"`
	// Headers are sent on every sse/http request (secret: masked in responses).
	Headers map[string]string `json:"headers,omitempty"`
	// Description is free text shown in the API and used by search.
	Description string `json:"description,omitempty"`
	// ToolNamePrefix prefixes exposed names with `<server>_`; default true
	// (false for static servers).
	ToolNamePrefix *bool `json:"tool_name_prefix,omitempty"`
	// ToolCallTimeout in seconds; nil = the catalog default (60 s).
	ToolCallTimeout *float64 `json:"tool_call_timeout,omitempty"`
	// SessionInitTimeout in seconds; absent = 60 s; 0 or JSON null = no bound
	// (docs/deerflow.md §5.1). Bounds connect + initialize + tools/list.
	SessionInitTimeout *float64 `json:"session_init_timeout,omitempty"`
	// SessionScope is shared (default) | per_tenant | per_user | per_thread.
	SessionScope string `json:"session_scope,omitempty"`
	// WorkingDir "thread" runs each per-thread child in the thread's
	// workspace (<catalog.workspaces.dir>/<thread id>/user-data/workspace);
	// stdio and session_scope per_thread only, without cwd
	// (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
	WorkingDir string `json:"working_dir,omitempty"`
	// Routing is the server-level routing (docs/deerflow.md §2.8).
	Routing *Routing `json:"routing,omitempty"`
	// Tools holds per-tool overrides keyed by original tool name.
	Tools map[string]ToolOverride `json:"tools,omitempty"`
	// Path is the JSON or JSONL file of a static server.
	Path string `json:"path,omitempty"`
	// Pin pins tool definitions (docs/architecture.md §7): a changed
	// definition waits for an admin's approval. nil = catalog.pin.
	Pin *bool `json:"pin,omitempty"`
	// PinNewTools is allow | review for new tools of a pinned server
	// ("" = catalog.pin_new_tools).
	PinNewTools string `json:"pin_new_tools,omitempty"`
	// Tenants lists the tenants that see the server and its tools; empty =
	// every tenant (docs/decisions/0105-tenant-scoped-servers.md).
	Tenants []string `json:"tenants,omitempty"`
	// Stateful marks a server that keeps state between calls outside its
	// sessions (files on the catalog's disk): with several catalog replicas
	// on PostgreSQL it runs on exactly one of them, by rendezvous hashing of
	// its name over the live replicas (docs/decisions/0086-session-placement.md).
	// Not allowed for static servers.
	Stateful bool `json:"stateful,omitempty"`
	// Extra holds unknown per-server keys, raw, written back unchanged.
	Extra []RawField `json:"-"`
}

// Routing is a routing hint (docs/deerflow.md §2.8). In a per-tool override
// only the fields that are set override the server's.
type Routing struct {
	// Mode is off | prefer.
	Mode *string `json:"mode,omitempty"`
	// Priority is clamped to 0..100.
	Priority *int `json:"priority,omitempty"`
	// Keywords trigger auto-promotion when one is a substring of the user message.
	Keywords []string `json:"keywords,omitempty"`
}

// ToolOverride is a per-tool entry of `tools`.
type ToolOverride struct {
	// Routing overrides the server's routing field by field.
	Routing *Routing `json:"routing,omitempty"`
}

// EffectiveRouting is the resolved routing of one tool.
type EffectiveRouting struct {
	Mode     string
	Priority int
	Keywords []string
}

// knownServerKeys are the per-server keys this package understands.
var knownServerKeys = map[string]bool{
	"enabled": true, "disabled": true, "serverUrl": true, "type": true, "transport": true, "command": true, "args": true, "env": true,
	"cwd": true, "url": true, "headers": true, "description": true, "tool_name_prefix": true, "pin": true, "pin_new_tools": true, "tenants": true,
	"tool_call_timeout": true, "session_init_timeout": true, "session_scope": true, "working_dir": true, "stateful": true,
	"routing": true, "tools": true, "path": true,
}

// IsEnabled reports whether the server runs: neither `"enabled": false`
// (DeerFlow) nor `"disabled": true` (Claude Desktop) is set. When the two
// keys disagree the server is disabled (Warnings reports it).
func (s *Server) IsEnabled() bool {
	return (s.Enabled == nil || *s.Enabled) && (s.Disabled == nil || !*s.Disabled)
}

// SetEnabled enables or disables the server, keeping the spelling the file
// uses: `disabled` is rewritten when present, `enabled` when present, and
// `enabled` is added when neither is.
func (s *Server) SetEnabled(v bool) {
	if s.Disabled != nil {
		d := !v
		s.Disabled = &d
	}
	if s.Enabled != nil || s.Disabled == nil {
		e := v
		s.Enabled = &e
	}
}

// EffectiveURL is `url`, or `serverUrl` when `url` is empty.
func (s *Server) EffectiveURL() string {
	if s.URL != "" {
		return s.URL
	}
	return s.ServerURL
}

// unknownKeyHints explains keys other MCP clients use that Toolplane does
// not honour, so a warning can say what to write instead.
var unknownKeyHints = map[string]string{
	"autoApprove":   "approval of tool calls is Toolplane's authz policy (policies, decisions)",
	"alwaysAllow":   "approval of tool calls is Toolplane's authz policy (policies, decisions)",
	"timeout":       "use tool_call_timeout (seconds) or session_init_timeout",
	"transportType": "use type (stdio, sse, http, static)",
}

// Warnings lists, one line each with its key path, what the server entry
// says that Toolplane does not act on: every unknown key (kept verbatim when
// the file is rewritten, but ignored) and contradicting keys.
func (s *Server) Warnings() []string {
	p := "mcpServers." + s.Name
	var out []string
	for _, m := range s.Extra {
		if m.Key == "oauth" {
			continue // read by ParseOAuth (oauth.go); its errors fail the server
		}
		if m.Key == "tools" && isJSONArray(m.Value) {
			continue // a declared tool list (declared.go), checked by Validate
		}
		w := fmt.Sprintf("%s.%s: unknown key, ignored (kept when the file is rewritten)", p, m.Key)
		if h, ok := unknownKeyHints[m.Key]; ok {
			w += "; " + h
		}
		out = append(out, w)
	}
	if s.Enabled != nil && s.Disabled != nil && *s.Enabled == *s.Disabled {
		out = append(out, fmt.Sprintf("%s.disabled: contradicts enabled; the server is disabled", p))
	}
	if s.URL != "" && s.ServerURL != "" && s.URL != s.ServerURL {
		out = append(out, fmt.Sprintf("%s.serverUrl: ignored, url is set", p))
	}
	return out
}

// EffectiveType resolves `type`, then `transport`, then infers: a command
// means stdio, a url means http (sse when the url path ends in /sse), a path
// means static; nothing means stdio (DeerFlow's default). A `serverUrl`
// (without `url`) means http. The alias
// "streamable-http"/"streamableHttp"/"streamable_http" means http.
func (s *Server) EffectiveType() string {
	t := s.Type
	if t == "" {
		t = s.Transport
	}
	switch strings.ToLower(t) {
	case "streamable-http", "streamablehttp", "streamable_http", "http":
		return TypeHTTP
	case "":
	default:
		return strings.ToLower(t)
	}
	switch {
	case s.Command != "":
		return TypeStdio
	case s.URL == "" && s.ServerURL != "":
		// Windsurf and Cursor use serverUrl for streamable HTTP.
		return TypeHTTP
	case s.URL != "":
		if strings.HasSuffix(strings.TrimRight(s.URL, "/"), "/sse") {
			return TypeSSE
		}
		return TypeHTTP
	case s.Path != "":
		return TypeStatic
	}
	return TypeStdio
}

// Prefixed reports whether exposed names get the `<server>_` prefix
// (default true; false for static servers, docs/architecture.md §7).
func (s *Server) Prefixed() bool {
	if s.ToolNamePrefix != nil {
		return *s.ToolNamePrefix
	}
	return s.EffectiveType() != TypeStatic
}

// Scope returns the effective session scope (default shared).
func (s *Server) Scope() string {
	if s.SessionScope == "" {
		return ScopeShared
	}
	return s.SessionScope
}

// InitTimeout returns the effective session_init_timeout (default 60 s; 0
// or null means no bound other than the caller's).
func (s *Server) InitTimeout() time.Duration {
	if s.SessionInitTimeout == nil {
		return DefaultSessionInitTimeout
	}
	return seconds(*s.SessionInitTimeout)
}

// CallTimeout returns tool_call_timeout, or 0 when unset.
func (s *Server) CallTimeout() time.Duration {
	if s.ToolCallTimeout == nil {
		return 0
	}
	return seconds(*s.ToolCallTimeout)
}

func seconds(f float64) time.Duration {
	if f <= 0 || math.IsNaN(f) {
		return 0
	}
	if f > 1e6 {
		f = 1e6
	}
	return time.Duration(f * float64(time.Second))
}

// ResolveRouting returns the effective routing of one original tool name:
// the server's routing with the set fields of `tools.<tool>.routing` applied;
// priority clamped to 0..100; mode defaults to off (docs/deerflow.md §2.8).
func (s *Server) ResolveRouting(tool string) EffectiveRouting {
	r := EffectiveRouting{Mode: RoutingOff}
	apply := func(x *Routing) {
		if x == nil {
			return
		}
		if x.Mode != nil {
			r.Mode = *x.Mode
		}
		if x.Priority != nil {
			r.Priority = *x.Priority
		}
		if x.Keywords != nil {
			r.Keywords = append([]string(nil), x.Keywords...)
		}
	}
	apply(s.Routing)
	if o, ok := s.Tools[tool]; ok {
		apply(o.Routing)
	}
	r.Priority = min(max(r.Priority, 0), 100)
	kw := r.Keywords[:0:0]
	for _, k := range r.Keywords {
		if strings.TrimSpace(k) != "" {
			kw = append(kw, k)
		}
	}
	r.Keywords = kw
	return r
}

// Validate checks the structure of one server (not the stdio command policy,
// see ValidateCommand). Errors name the field, e.g.
// `mcpServers.github.url: required for type http`.
func (s *Server) Validate() error {
	p := "mcpServers." + s.Name
	if s.Name == "" {
		return errors.New("mcpServers: empty server name")
	}
	switch s.EffectiveType() {
	case TypeStdio:
		if s.Command == "" {
			return fmt.Errorf("%s.command: required for type stdio", p)
		}
	case TypeSSE, TypeHTTP:
		if s.EffectiveURL() == "" {
			return fmt.Errorf("%s.url: required for type %s (or serverUrl)", p, s.EffectiveType())
		}
	case TypeStatic:
		if s.Path == "" {
			return fmt.Errorf("%s.path: required for type static", p)
		}
	default:
		return fmt.Errorf("%s.type: %q is not one of stdio, sse, http, static", p, s.EffectiveType())
	}
	switch s.SessionScope {
	case "", ScopeShared, ScopePerTenant, ScopePerUser, ScopePerThread:
	default:
		return fmt.Errorf("%s.session_scope: %q is not one of shared, per_tenant, per_user, per_thread", p, s.SessionScope)
	}
	if err := s.validateScopeDir(p); err != nil {
		return err
	}
	if s.Stateful && s.EffectiveType() == TypeStatic {
		return fmt.Errorf("%s.stateful: a static server keeps no state (it runs nowhere)", p)
	}
	switch {
	case s.WorkingDir == "":
	case s.WorkingDir != WorkingDirThread:
		return fmt.Errorf("%s.working_dir: %q is not supported (the one value is %q)", p, s.WorkingDir, WorkingDirThread)
	case s.EffectiveType() != TypeStdio:
		return fmt.Errorf("%s.working_dir: only stdio servers run in a thread's workspace (type is %s)", p, s.EffectiveType())
	case s.SessionScope != ScopePerThread:
		return fmt.Errorf("%s.working_dir: %q requires session_scope per_thread (one child per thread)", p, s.WorkingDir)
	case s.Cwd != "":
		return fmt.Errorf("%s.working_dir: cannot be combined with cwd", p)
	}
	if s.ToolCallTimeout != nil && (*s.ToolCallTimeout < 0 || math.IsNaN(*s.ToolCallTimeout)) {
		return fmt.Errorf("%s.tool_call_timeout: must be >= 0 seconds", p)
	}
	if s.SessionInitTimeout != nil && (*s.SessionInitTimeout < 0 || math.IsNaN(*s.SessionInitTimeout)) {
		return fmt.Errorf("%s.session_init_timeout: must be >= 0 seconds", p)
	}
	switch s.PinNewTools {
	case "", PinNewAllow, PinNewReview:
	default:
		return fmt.Errorf("%s.pin_new_tools: %q is not one of allow, review", p, s.PinNewTools)
	}
	seenTenant := make(map[string]bool, len(s.Tenants))
	for i, t := range s.Tenants {
		if !validTenant(t) {
			return fmt.Errorf("%s.tenants[%d]: %q is not a tenant id (1..64 characters of [A-Za-z0-9_.@-])", p, i, t)
		}
		if seenTenant[t] {
			return fmt.Errorf("%s.tenants[%d]: duplicate tenant %q", p, i, t)
		}
		seenTenant[t] = true
	}
	if err := s.Routing.validate(p + ".routing"); err != nil {
		return err
	}
	for tool, o := range s.Tools {
		if err := o.Routing.validate(p + ".tools." + tool + ".routing"); err != nil {
			return err
		}
	}
	return s.validateDeclared(p)
}

// validTenant is the rule for tenant ids in `tenants`: what a principal's
// tenant can be compared with byte for byte ("*" and empty are refused, so
// no entry can mean "every tenant").
func validTenant(t string) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '@') {
			return false
		}
	}
	return true
}

// VisibleTo reports whether a principal of tenant sees the server: it lists
// no tenants (every tenant) or lists tenant.
func (s *Server) VisibleTo(tenant string) bool {
	return len(s.Tenants) == 0 || slices.Contains(s.Tenants, tenant)
}

// OwnedBy reports whether the server belongs to exactly one tenant, tenant:
// what a tenant admin may write (docs/decisions/0105-tenant-scoped-servers.md).
func (s *Server) OwnedBy(tenant string) bool {
	return len(s.Tenants) == 1 && s.Tenants[0] == tenant
}

// NameScope is the visibility scope its tools' exposed names are assigned
// in: the tenant for a server of exactly one tenant, "*" otherwise
// (docs/decisions/0105-tenant-scoped-servers.md).
func (s *Server) NameScope() string {
	if len(s.Tenants) == 1 {
		return s.Tenants[0]
	}
	return "*"
}

func (r *Routing) validate(path string) error {
	if r == nil || r.Mode == nil {
		return nil
	}
	switch *r.Mode {
	case RoutingOff, RoutingPrefer:
		return nil
	}
	return fmt.Errorf("%s.mode: %q is not one of off, prefer", path, *r.Mode)
}

// Parse decodes an extensions_config.json document. A missing or null
// mcpServers is an empty list. Unknown keys inside `routing` are rejected
// (docs/deerflow.md §2.8); other unknown keys are kept.
func Parse(data []byte) (*File, error) {
	f := &File{}
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	top, err := orderedObject(data)
	if err != nil {
		return nil, fmt.Errorf("extensions config: %w", err)
	}
	for _, m := range top {
		if m.Key != "mcpServers" {
			f.Extra = append(f.Extra, m)
			continue
		}
		if string(bytes.TrimSpace(m.Value)) == "null" {
			continue
		}
		servers, err := orderedObject(m.Value)
		if err != nil {
			return nil, fmt.Errorf("mcpServers: %w", err)
		}
		seen := map[string]bool{}
		for _, sm := range servers {
			if seen[sm.Key] {
				return nil, fmt.Errorf("mcpServers.%s: duplicate server name", sm.Key)
			}
			seen[sm.Key] = true
			s, err := parseServer(sm.Key, sm.Value)
			if err != nil {
				return nil, err
			}
			f.Servers = append(f.Servers, s)
		}
	}
	return f, nil
}

func parseServer(name string, raw json.RawMessage) (Server, error) {
	s := Server{Name: name}
	fields, err := orderedObject(raw)
	if err != nil {
		return s, fmt.Errorf("mcpServers.%s: %w", name, err)
	}
	known := map[string]json.RawMessage{}
	for _, m := range fields {
		// `tools` as an array is a declared tool list (declared.go), kept
		// raw and written back as it is; as an object, per-tool overrides.
		if knownServerKeys[m.Key] && !(m.Key == "tools" && isJSONArray(m.Value)) {
			known[m.Key] = m.Value
		} else {
			var c bytes.Buffer
			if json.Compact(&c, m.Value) == nil {
				m.Value = c.Bytes()
			}
			s.Extra = append(s.Extra, m)
		}
	}
	b, _ := json.Marshal(known)
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("mcpServers.%s: %w", name, fieldError(err))
	}
	// DeerFlow: `"session_init_timeout": null` disables the bound.
	if v, ok := known["session_init_timeout"]; ok && string(bytes.TrimSpace(v)) == "null" {
		zero := 0.0
		s.SessionInitTimeout = &zero
	}
	// Routing objects reject unknown keys.
	if r, ok := known["routing"]; ok {
		if err := strictRouting(r); err != nil {
			return s, fmt.Errorf("mcpServers.%s.routing: %w", name, err)
		}
	}
	if t, ok := known["tools"]; ok && string(bytes.TrimSpace(t)) != "null" {
		var m map[string]map[string]json.RawMessage
		if err := json.Unmarshal(t, &m); err == nil {
			for tool, o := range m {
				for k, v := range o {
					if k != "routing" {
						return s, fmt.Errorf("mcpServers.%s.tools.%s.%s: unknown key", name, tool, k)
					}
					if err := strictRouting(v); err != nil {
						return s, fmt.Errorf("mcpServers.%s.tools.%s.routing: %w", name, tool, err)
					}
				}
			}
		}
	}
	return s, nil
}

func strictRouting(raw json.RawMessage) error {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r Routing
	return fieldError(dec.Decode(&r))
}

func fieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err
}

// orderedObject splits a JSON object into its members in order.
func orderedObject(data []byte) ([]RawField, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object")
	}
	var out []RawField
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, RawField{Key: key, Value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	return out, nil
}

// Marshal encodes the file: `mcpServers` first, servers in order with their
// known keys then their unknown keys, then the other top-level keys in their
// original order. Placeholders are written as stored (never expanded).
func (f *File) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("{\n  \"mcpServers\": {")
	for i, s := range f.Servers {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := s.marshal()
		if err != nil {
			return nil, err
		}
		k, _ := json.Marshal(s.Name)
		buf.WriteString("\n    ")
		buf.Write(k)
		buf.WriteString(": ")
		buf.Write(b)
	}
	if len(f.Servers) > 0 {
		buf.WriteString("\n  ")
	}
	buf.WriteString("}")
	for _, m := range f.Extra {
		k, _ := json.Marshal(m.Key)
		buf.WriteString(",\n  ")
		buf.Write(k)
		buf.WriteString(": ")
		buf.Write(m.Value)
	}
	buf.WriteString("\n}\n")
	// Re-indent for readability; the content is unchanged.
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func (s *Server) marshal() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(s.Extra) == 0 {
		return b, nil
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	first := len(b) == 2
	for _, m := range s.Extra {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(m.Key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.Value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Load reads and parses path. A missing file is an empty config (no servers).
func Load(path string) (*File, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &File{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	f, err := Parse(data)
	return f, data, err
}

// WriteAtomic writes data to path atomically: a temp file in the same
// directory, fsync, rename, then fsync of the directory. The file mode is 0600.
func WriteAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Clone returns a deep copy of s.
func (s Server) Clone() Server {
	b, _ := s.marshal()
	c, _ := parseServer(s.Name, b)
	return c
}

// Equal reports whether two servers have the same configuration (name and
// every key, including unknown ones).
func (s *Server) Equal(o *Server) bool {
	if s.Name != o.Name {
		return false
	}
	a, _ := s.marshal()
	b, _ := o.marshal()
	return bytes.Equal(a, b)
}
