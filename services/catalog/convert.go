package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"google.golang.org/protobuf/proto"
	"math"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// rawStruct converts a raw JSON object to a Struct (nil when absent or not
// an object). Numbers become doubles, as Struct demands.
func rawStruct(raw json.RawMessage) *structpb.Struct {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// schemaProblems flags input schemas that are not object schemas (kept anyway).
func schemaProblems(raw json.RawMessage) []string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []string{"input schema is missing"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return []string{"input schema is not an object schema (not a JSON object)"}
	}
	if t, ok := m["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		return []string{"input schema is not an object schema (type is " + string(t) + ")"}
	}
	return nil
}

func serverTypeEnum(t string) catalogv1.ServerType {
	switch t {
	case catalogconfig.TypeStdio:
		return catalogv1.ServerType_SERVER_TYPE_STDIO
	case catalogconfig.TypeSSE:
		return catalogv1.ServerType_SERVER_TYPE_SSE
	case catalogconfig.TypeHTTP:
		return catalogv1.ServerType_SERVER_TYPE_HTTP
	case catalogconfig.TypeStatic:
		return catalogv1.ServerType_SERVER_TYPE_STATIC
	}
	return catalogv1.ServerType_SERVER_TYPE_UNSPECIFIED
}

func serverTypeString(t catalogv1.ServerType) string {
	switch t {
	case catalogv1.ServerType_SERVER_TYPE_STDIO:
		return catalogconfig.TypeStdio
	case catalogv1.ServerType_SERVER_TYPE_SSE:
		return catalogconfig.TypeSSE
	case catalogv1.ServerType_SERVER_TYPE_HTTP:
		return catalogconfig.TypeHTTP
	case catalogv1.ServerType_SERVER_TYPE_STATIC:
		return catalogconfig.TypeStatic
	}
	return ""
}

func scopeEnum(s string) catalogv1.SessionScope {
	switch s {
	case catalogconfig.ScopePerTenant:
		return catalogv1.SessionScope_SESSION_SCOPE_PER_TENANT
	case catalogconfig.ScopePerUser:
		return catalogv1.SessionScope_SESSION_SCOPE_PER_USER
	case catalogconfig.ScopePerThread:
		return catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD
	}
	return catalogv1.SessionScope_SESSION_SCOPE_SHARED
}

func scopeString(s catalogv1.SessionScope) string {
	switch s {
	case catalogv1.SessionScope_SESSION_SCOPE_PER_TENANT:
		return catalogconfig.ScopePerTenant
	case catalogv1.SessionScope_SESSION_SCOPE_PER_USER:
		return catalogconfig.ScopePerUser
	case catalogv1.SessionScope_SESSION_SCOPE_PER_THREAD:
		return catalogconfig.ScopePerThread
	case catalogv1.SessionScope_SESSION_SCOPE_SHARED:
		return catalogconfig.ScopeShared
	}
	return ""
}

func stateEnum(s catalogmcp.State) catalogv1.ServerState {
	switch s {
	case catalogmcp.StateDisabled:
		return catalogv1.ServerState_SERVER_STATE_DISABLED
	case catalogmcp.StateConnecting:
		return catalogv1.ServerState_SERVER_STATE_CONNECTING
	case catalogmcp.StateReady:
		return catalogv1.ServerState_SERVER_STATE_READY
	case catalogmcp.StateFailed:
		return catalogv1.ServerState_SERVER_STATE_FAILED
	case catalogmcp.StateNeedsAuth:
		return catalogv1.ServerState_SERVER_STATE_NEEDS_AUTH
	}
	return catalogv1.ServerState_SERVER_STATE_UNSPECIFIED
}

func routingProto(r catalogconfig.EffectiveRouting) *catalogv1.Routing {
	mode := catalogv1.RoutingMode_ROUTING_MODE_OFF
	if r.Mode == catalogconfig.RoutingPrefer {
		mode = catalogv1.RoutingMode_ROUTING_MODE_PREFER
	}
	return &catalogv1.Routing{Mode: mode, Priority: int32(r.Priority), Keywords: r.Keywords}
}

func routingFromConfig(r *catalogconfig.Routing) *catalogv1.Routing {
	if r == nil {
		return nil
	}
	out := &catalogv1.Routing{Keywords: r.Keywords}
	if r.Mode != nil {
		out.Mode = catalogv1.RoutingMode_ROUTING_MODE_OFF
		if *r.Mode == catalogconfig.RoutingPrefer {
			out.Mode = catalogv1.RoutingMode_ROUTING_MODE_PREFER
		}
	}
	if r.Priority != nil {
		out.Priority = int32(*r.Priority)
	}
	return out
}

// routingToConfig maps a proto Routing to the config form: mode UNSPECIFIED,
// priority 0 and empty keywords mean "not set" (proto3 cannot say more), so
// a per-tool override with them inherits the server's value.
func routingToConfig(r *catalogv1.Routing) *catalogconfig.Routing {
	if r == nil {
		return nil
	}
	out := &catalogconfig.Routing{}
	switch r.GetMode() {
	case catalogv1.RoutingMode_ROUTING_MODE_OFF:
		m := catalogconfig.RoutingOff
		out.Mode = &m
	case catalogv1.RoutingMode_ROUTING_MODE_PREFER:
		m := catalogconfig.RoutingPrefer
		out.Mode = &m
	}
	if r.GetPriority() != 0 {
		p := int(r.GetPriority())
		out.Priority = &p
	}
	if len(r.GetKeywords()) > 0 {
		out.Keywords = slices.Clone(r.GetKeywords())
	}
	return out
}

func durSeconds(f *float64) *durationpb.Duration {
	if f == nil {
		return nil
	}
	return durationpb.New(time.Duration(*f * float64(time.Second)))
}

func secondsPtr(d *durationpb.Duration) *float64 {
	if d == nil {
		return nil
	}
	f := d.AsDuration().Seconds()
	return &f
}

// configProto renders a config entry (call with a masked copy for responses).
func configProto(s catalogconfig.Server) *catalogv1.ServerConfig {
	c := &catalogv1.ServerConfig{
		Name: s.Name, Enabled: proto.Bool(s.IsEnabled()), Type: serverTypeEnum(s.EffectiveType()), Command: s.Command,
		Args: s.Args, Env: s.Env, Cwd: s.Cwd, Url: s.EffectiveURL(), Headers: s.Headers, Description: s.Description,
		ToolNamePrefix: s.ToolNamePrefix, ToolCallTimeout: durSeconds(s.ToolCallTimeout),
		SessionInitTimeout: durSeconds(s.SessionInitTimeout), SessionScope: scopeEnum(s.Scope()),
		Routing: routingFromConfig(s.Routing), Path: s.Path, Pin: s.Pin, PinNewTools: s.PinNewTools,
		Tenants: slices.Clone(s.Tenants), WorkingDir: s.WorkingDir, Stateful: s.Stateful,
	}
	tools := make([]string, 0, len(s.Tools))
	for k := range s.Tools {
		tools = append(tools, k)
	}
	sort.Strings(tools)
	for _, k := range tools {
		c.ToolRouting = append(c.ToolRouting, &catalogv1.ToolRouting{Tool: k, Routing: routingFromConfig(s.Tools[k].Routing)})
	}
	return c
}

// configFromProto converts a written ServerConfig. prev (the stored entry of
// the same name, or nil) supplies the unknown keys the API cannot express
// (e.g. `oauth`), which are kept.
func configFromProto(c *catalogv1.ServerConfig, prev *catalogconfig.Server) (catalogconfig.Server, error) {
	s := catalogconfig.Server{Name: c.GetName(), Type: serverTypeString(c.GetType()), Command: c.GetCommand(),
		Args: slices.Clone(c.GetArgs()), Cwd: c.GetCwd(), URL: c.GetUrl(), Description: c.GetDescription(),
		ToolNamePrefix: c.ToolNamePrefix, ToolCallTimeout: secondsPtr(c.GetToolCallTimeout()),
		SessionInitTimeout: secondsPtr(c.GetSessionInitTimeout()), SessionScope: scopeString(c.GetSessionScope()),
		Routing: routingToConfig(c.GetRouting()), Path: c.GetPath(), Pin: c.Pin, PinNewTools: c.GetPinNewTools(),
		Tenants: slices.Clone(c.GetTenants()), WorkingDir: c.GetWorkingDir(), Stateful: c.GetStateful()}
	if c.Enabled != nil && !c.GetEnabled() {
		f := false
		s.Enabled = &f
	}
	if len(c.GetEnv()) > 0 {
		s.Env = map[string]string{}
		for k, v := range c.GetEnv() {
			s.Env[k] = v
		}
	}
	if len(c.GetHeaders()) > 0 {
		s.Headers = map[string]string{}
		for k, v := range c.GetHeaders() {
			s.Headers[k] = v
		}
	}
	for i, tr := range c.GetToolRouting() {
		if tr.GetTool() == "" {
			return s, fmt.Errorf("mcpServers.%s.tool_routing[%d].tool: required", s.Name, i)
		}
		if s.Tools == nil {
			s.Tools = map[string]catalogconfig.ToolOverride{}
		}
		s.Tools[tr.GetTool()] = catalogconfig.ToolOverride{Routing: routingToConfig(tr.GetRouting())}
	}
	for _, f := range []*float64{s.ToolCallTimeout, s.SessionInitTimeout} {
		if f != nil && (math.IsNaN(*f) || *f < 0) {
			return s, fmt.Errorf("mcpServers.%s: timeouts must be >= 0", s.Name)
		}
	}
	if prev != nil {
		s.Extra = slices.Clone(prev.Extra)
	}
	return s, nil
}

// serverProto renders a server status, secrets masked.
func serverProto(st catalogmcp.Status, scoped int) *catalogv1.Server {
	return &catalogv1.Server{
		Config: configProto(catalogconfig.Masked(st.Config)), State: stateEnum(st.State), LastError: st.LastError,
		RestartCount: int32(st.Restarts), ToolCount: int32(len(st.Tools)), ProtocolVersion: st.ProtocolVersion,
		ServerName: st.ServerInfo.Name, ServerVersion: st.ServerInfo.Version,
		StateChangedAt: timestamppb.New(st.ChangedAt), ScopedSessions: int32(scoped),
		ConfigWarnings: st.Config.Warnings(),
	}
}

// contentBlock converts one raw MCP content block faithfully. An unknown
// block type keeps its raw JSON in text with type UNSPECIFIED.
func contentBlock(raw json.RawMessage) *typev1.ContentBlock {
	var b struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		Data        string          `json:"data"`
		MimeType    string          `json:"mimeType"`
		URI         string          `json:"uri"`
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		Annotations json.RawMessage `json:"annotations"`
		Meta        json.RawMessage `json:"_meta"`
		Resource    *struct {
			URI      string          `json:"uri"`
			MimeType string          `json:"mimeType"`
			Text     string          `json:"text"`
			Blob     string          `json:"blob"`
			Meta     json.RawMessage `json:"_meta"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return &typev1.ContentBlock{Text: string(raw)}
	}
	cb := &typev1.ContentBlock{Annotations: rawStruct(b.Annotations), Meta: rawStruct(b.Meta)}
	switch b.Type {
	case "text":
		cb.Type, cb.Text = typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, b.Text
	case "image":
		cb.Type, cb.Data, cb.MimeType = typev1.ContentBlockType_CONTENT_BLOCK_TYPE_IMAGE, b.Data, b.MimeType
	case "audio":
		cb.Type, cb.Data, cb.MimeType = typev1.ContentBlockType_CONTENT_BLOCK_TYPE_AUDIO, b.Data, b.MimeType
	case "resource_link":
		cb.Type = typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE_LINK
		cb.Uri, cb.Name, cb.Title, cb.Description, cb.MimeType = b.URI, b.Name, b.Title, b.Description, b.MimeType
	case "resource":
		cb.Type = typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE
		if r := b.Resource; r != nil {
			cb.Uri, cb.MimeType, cb.Text, cb.Blob = r.URI, r.MimeType, r.Text, r.Blob
			if cb.Meta == nil {
				cb.Meta = rawStruct(r.Meta)
			}
		}
	default:
		cb.Text = string(raw)
	}
	return cb
}

func resultProto(res *catalogmcp.Result, server, original string) *catalogv1.CallToolResponse {
	out := &catalogv1.CallToolResponse{IsError: res.IsError, StructuredContent: rawStruct(res.StructuredContent),
		Meta: rawStruct(res.Meta), Server: server, OriginalName: original}
	out.Content = make([]*typev1.ContentBlock, len(res.Content))
	for i, c := range res.Content {
		out.Content[i] = contentBlock(c)
	}
	if wd := res.WorkDir; wd != nil {
		out.WorkingDirectory = &catalogv1.WorkingDirectory{Path: wd.Path, UserDataRoot: wd.UserDataRoot}
	}
	return out
}

func notificationProto(n catalogmcp.Notification) *typev1.Notification {
	return &typev1.Notification{Method: n.Method, Params: rawStruct(n.Params)}
}
