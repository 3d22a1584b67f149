package runtimemcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// credentialKey is a stable, non-reversible key of an Authorization value.
func credentialKey(authorization string) string {
	sum := sha256.Sum256([]byte(authorization))
	return hex.EncodeToString(sum[:8])
}

// toolsFrom converts the assembled tools to MCP tools: name, description and
// input schema of the mcp profile's bound form (assembly fixed the root of
// the schema so every official SDK accepts it; $defs, $ref and the 2020-12
// dialect pass unchanged, docs/architecture.md §3.1), else of the Anthropic
// form's input_schema, else of the OpenAI form's parameters. tool_search's
// description gets the deferred-tools section appended when it does not
// already carry the deferred names.
func toolsFrom(a *runtimev1.AssembleToolsResponse) []mcp.Tool {
	deferredText := ""
	for _, ps := range a.GetPromptSections() {
		if ps.GetName() == "deferred_tools" {
			deferredText = ps.GetText()
		}
	}
	out := make([]mcp.Tool, 0, len(a.GetTools()))
	for _, ts := range a.GetTools() {
		name, desc, schema := ts.GetName(), "", map[string]any(nil)
		if b := ts.GetBound().AsMap(); b["inputSchema"] != nil {
			desc, _ = b["description"].(string)
			schema, _ = b["inputSchema"].(map[string]any)
			if n, _ := b["name"].(string); n != "" {
				name = n
			}
		}
		if an := ts.GetAnthropic().AsMap(); schema == nil && len(an) > 0 {
			desc, _ = an["description"].(string)
			schema, _ = an["input_schema"].(map[string]any)
		}
		if schema == nil {
			if fn, ok := ts.GetOpenai().AsMap()["function"].(map[string]any); ok {
				if desc == "" {
					desc, _ = fn["description"].(string)
				}
				schema, _ = fn["parameters"].(map[string]any)
			}
		}
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		raw, err := json.Marshal(schema)
		if err != nil {
			raw = []byte(`{"type":"object"}`)
		}
		if ts.GetName() == "tool_search" && deferredText != "" && !containsAll(desc, a.GetDeferred()) {
			desc = strings.TrimSpace(desc + "\n\n" + deferredText)
		}
		out = append(out, mcp.NewToolWithRawSchema(name, desc, raw))
	}
	return out
}

func containsAll(s string, names []string) bool {
	for _, n := range names {
		if !strings.Contains(s, n) {
			return false
		}
	}
	return true
}

// toolArguments converts the call's arguments: a JSON object becomes the
// Struct; anything else (an array, a scalar) is passed as raw text so the
// runtime answers with its own malformed-arguments error.
func toolArguments(req mcp.CallToolRequest) (*structpb.Struct, string, error) {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		if req.Params.Arguments == nil {
			return &structpb.Struct{Fields: map[string]*structpb.Value{}}, "", nil
		}
		b, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, "", fmt.Errorf("arguments: %w", err)
		}
		raw = b
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if strings.TrimSpace(string(raw)) == "null" {
			return &structpb.Struct{Fields: map[string]*structpb.Value{}}, "", nil
		}
		return nil, string(raw), nil
	}
	st, err := structpb.NewStruct(obj)
	if err != nil {
		return nil, string(raw), nil
	}
	return st, "", nil
}

// resultFrom converts a runtime ToolResult to an MCP result: content blocks
// faithfully, isError for a failed call, structuredContent, and `_meta` with
// the error kind, reason code and promoted names.
func resultFrom(r *runtimev1.ToolResult) (*mcp.CallToolResult, error) {
	if r == nil {
		return nil, fmt.Errorf("toolplane runtime: empty tool result")
	}
	res := &mcp.CallToolResult{Content: make([]mcp.Content, 0, len(r.GetContent()))}
	for i, b := range r.GetContent() {
		c, err := contentFrom(b)
		if err != nil {
			return nil, fmt.Errorf("toolplane runtime: result content[%d]: %w", i, err)
		}
		res.Content = append(res.Content, c)
	}
	res.IsError = r.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR
	if sc := r.GetStructuredContent(); sc != nil {
		res.StructuredContent = sc.AsMap()
	}
	meta := map[string]any{}
	if res.IsError {
		meta[MetaErrorKind] = strings.TrimPrefix(r.GetErrorKind().String(), "ERROR_KIND_")
		if rc := r.GetReasonCode(); rc != "" {
			meta[MetaReasonCode] = rc
		}
	}
	if names := r.GetPromoted().GetNames(); len(names) > 0 {
		meta[MetaPromoted] = append([]string(nil), names...)
	}
	if len(meta) > 0 {
		res.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	return res, nil
}

// contentFrom converts one ContentBlock to its MCP content (MCP 2025-06-18
// "Tool Result"), keeping annotations and _meta.
func contentFrom(b *typev1.ContentBlock) (mcp.Content, error) {
	m := map[string]any{}
	switch b.GetType() {
	case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, typev1.ContentBlockType_CONTENT_BLOCK_TYPE_UNSPECIFIED:
		m["type"], m["text"] = "text", b.GetText()
	case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_IMAGE:
		m["type"], m["data"], m["mimeType"] = "image", b.GetData(), b.GetMimeType()
	case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_AUDIO:
		m["type"], m["data"], m["mimeType"] = "audio", b.GetData(), b.GetMimeType()
	case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE_LINK:
		m["type"], m["uri"], m["name"] = "resource_link", b.GetUri(), b.GetName()
		if b.GetTitle() != "" {
			m["title"] = b.GetTitle()
		}
		if b.GetDescription() != "" {
			m["description"] = b.GetDescription()
		}
		if b.GetMimeType() != "" {
			m["mimeType"] = b.GetMimeType()
		}
	case typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE:
		res := map[string]any{"uri": b.GetUri()}
		if b.GetMimeType() != "" {
			res["mimeType"] = b.GetMimeType()
		}
		if b.GetBlob() != "" {
			res["blob"] = b.GetBlob()
		} else {
			res["text"] = b.GetText()
		}
		m["type"], m["resource"] = "resource", res
	default:
		return nil, fmt.Errorf("unknown content type %v", b.GetType())
	}
	if a := b.GetAnnotations(); a != nil {
		m["annotations"] = a.AsMap()
	}
	if md := b.GetMeta(); md != nil {
		m["_meta"] = md.AsMap()
	}
	return mcp.ParseContent(m)
}
