package runtimeschema

// Render returns the tool in the provider's own request form:
//
//   - openai_chat: {"type": "function", "function": {"name", "description",
//     "parameters", "strict"}} (Chat Completions `tools[]`);
//   - openai_responses: {"type": "function", "name", "description",
//     "parameters", "strict"} (Responses `tools[]`);
//   - anthropic_messages: {"name", "description", "input_schema"} (Messages
//     `tools[]`);
//   - gemini: {"name", "description", "parameters"} (a FunctionDeclaration);
//   - mcp: {"name", "description", "inputSchema"} (an MCP Tool).
//
// strict is always sent by the OpenAI profiles: the Responses API defaults it
// to true. The returned map shares the bound schema: callers copy it before
// changing it.
func (b *Bound) Render() map[string]any {
	fn := map[string]any{"name": b.Name}
	if b.Description != "" {
		fn["description"] = b.Description
	}
	switch b.Profile {
	case OpenAIChat:
		fn["parameters"] = b.Parameters
		fn["strict"] = b.Strict
		return map[string]any{"type": "function", "function": fn}
	case OpenAIResponses:
		fn["type"] = "function"
		fn["parameters"] = b.Parameters
		fn["strict"] = b.Strict
		return fn
	case AnthropicMessages:
		fn["input_schema"] = b.Parameters
		return fn
	case Gemini:
		if b.Parameters != nil {
			fn["parameters"] = b.Parameters
		}
		return fn
	default:
		fn["inputSchema"] = b.Parameters
		return fn
	}
}
