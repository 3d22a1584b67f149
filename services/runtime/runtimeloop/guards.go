package runtimeloop

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// blockedTags are framework and authority tag names escaped in user text
// (docs/deerflow.md §6.2 InputSanitization): a user cannot forge a
// system reminder, a skills or deferred-tools section, or an instruction block.
var blockedTags = []string{
	"system-reminder", "system_reminder", "memory", "skill_system", "available-deferred-tools",
	"available_deferred_tools", "mcp_routing_hints", "slash_skill_activation", "durable_context_data",
	"durable_context", "available_skills", "skill", "skills", "skill_context", "subagent_system",
	"current_uploads", "uploaded_files", "todo_list", "todos", "human_input", "clarification",
	"loop_detected", "token_budget", "tool_call", "tool_calls", "tool_result", "tool_results",
	"function_call", "function_calls", "function_results", "tool_use", "thinking",
	"system", "system_prompt", "instruction", "instructions", "important", "override", "ignore",
	"prompt", "developer", "admin", "assistant", "user", "context", "policy", "rules",
}

var blockedTagRE = regexp.MustCompile(`(?i)<\s*/?\s*(?:` + func() string {
	q := make([]string, len(blockedTags))
	for i, t := range blockedTags {
		q[i] = regexp.QuoteMeta(t)
	}
	// Longest first so "system-reminder" wins over "system".
	sort.Slice(q, func(a, b int) bool { return len(q[a]) > len(q[b]) })
	return strings.Join(q, "|")
}() + `)(?:\s[^<>]*)?/?\s*>`)

var boundaryRE = regexp.MustCompile(`(?i)-{3,}\s*(BEGIN|END)\s+USER\s+INPUT\s*-{3,}`)

// Boundary markers around sanitised user text.
const (
	beginUserInput = "--- BEGIN USER INPUT ---"
	endUserInput   = "--- END USER INPUT ---"
)

// SanitizeUserInput HTML-escapes blocked framework tags, neutralises
// forged boundary markers and wraps the text in the user-input boundary
// (docs/deerflow.md §6.2 InputSanitization). Applied to the model request
// only, never to the stored message.
func SanitizeUserInput(s string) string {
	s = blockedTagRE.ReplaceAllStringFunc(s, func(m string) string {
		return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(m)
	})
	s = boundaryRE.ReplaceAllString(s, "[user input boundary removed: $1]")
	return beginUserInput + "\n" + s + "\n" + endUserInput
}

// validToolName matches provider-safe tool names (docs/architecture.md §7).
var validToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// invalidToolName replaces an empty or malformed tool name in history so a
// provider never rejects the thread (docs/deerflow.md §6.2 DanglingToolCall).
const invalidToolName = "invalid_tool_name"

// danglingText is the result synthesised for a tool call without a result.
const danglingText = "[Tool call interrupted: no result was recorded for this call. Do not assume it ran; call it again if it is still needed.]"

// repairHistory prepares stored messages for a model request
// (docs/deerflow.md §6.2 DanglingToolCall): system messages are dropped
// (the loop sends one coalesced system message), malformed tool names and
// ids are sanitised, every assistant tool call gets a result right after its
// message (a synthesised error result when none was recorded), results are
// put in call order, and orphan tool results are dropped. The input is not
// modified.
func repairHistory(in []*runtimev1.Message) []*runtimev1.Message {
	out := make([]*runtimev1.Message, 0, len(in))
	for i := 0; i < len(in); i++ {
		m := in[i]
		switch m.GetRole() {
		case runtimev1.MessageRole_MESSAGE_ROLE_SYSTEM, runtimev1.MessageRole_MESSAGE_ROLE_UNSPECIFIED:
			continue
		case runtimev1.MessageRole_MESSAGE_ROLE_TOOL:
			continue // orphan: not right after an assistant message with that call
		case runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
			if len(m.GetToolCalls()) == 0 {
				out = append(out, m)
				continue
			}
			a := proto.Clone(m).(*runtimev1.Message)
			for k, tc := range a.ToolCalls {
				if !validToolName.MatchString(tc.GetName()) {
					tc.Name = invalidToolName
				}
				if tc.GetId() == "" {
					tc.Id = fmt.Sprintf("call_%s_%d", shortID(m.GetId()), k)
				}
			}
			results := map[string]*runtimev1.Message{}
			j := i + 1
			for ; j < len(in) && in[j].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL; j++ {
				if _, dup := results[in[j].GetToolCallId()]; !dup {
					results[in[j].GetToolCallId()] = in[j]
				}
			}
			out = append(out, a)
			for k, tc := range a.ToolCalls {
				orig := m.GetToolCalls()[k].GetId()
				r := results[orig]
				if r == nil && orig != tc.GetId() {
					r = results[tc.GetId()]
				}
				if r != nil {
					if r.GetToolCallId() != tc.GetId() || r.GetName() != tc.GetName() {
						r = proto.Clone(r).(*runtimev1.Message)
						r.ToolCallId, r.Name = tc.GetId(), tc.GetName()
					}
					out = append(out, r)
					continue
				}
				out = append(out, &runtimev1.Message{
					Role: runtimev1.MessageRole_MESSAGE_ROLE_TOOL, ToolCallId: tc.GetId(), Name: tc.GetName(),
					Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, Content: danglingText,
				})
			}
			i = j - 1
		default:
			out = append(out, m)
		}
	}
	return out
}

func shortID(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	if s == "" {
		return "x"
	}
	return s
}

// loopDetector is the one loop detector of a turn (docs/deerflow.md §6.2
// LoopDetection): the multiset of each response's tool calls is hashed
// (order-independent; read_file keyed by path and a 200-line bucket, writes
// by their full arguments, other tools by their salient arguments) and
// counted over the last Window responses; a per-tool-name counter bounds
// one tool's calls in the turn.
type loopDetector struct {
	cfg     LoopDetection
	window  []string
	perTool map[string]int
}

type loopVerdict int

const (
	loopOK loopVerdict = iota
	loopWarn
	loopHard
)

func newLoopDetector(cfg LoopDetection) *loopDetector {
	return &loopDetector{cfg: cfg, perTool: map[string]int{}}
}

// observe records one response's calls and returns the verdict and, for
// warn/hard, a description.
func (d *loopDetector) observe(calls []*runtimev1.ToolCall) (loopVerdict, string) {
	if d.cfg.Disabled || len(calls) == 0 {
		return loopOK, ""
	}
	keys := make([]string, 0, len(calls))
	names := make([]string, 0, len(calls))
	verdict, why := loopOK, ""
	for _, c := range calls {
		keys = append(keys, callKey(c))
		names = append(names, c.GetName())
		d.perTool[c.GetName()]++
		switch n := d.perTool[c.GetName()]; {
		case n >= d.cfg.ToolHard:
			verdict, why = loopHard, fmt.Sprintf("tool %q was called %d times in this turn", c.GetName(), n)
		case n == d.cfg.ToolWarn && verdict == loopOK:
			verdict, why = loopWarn, fmt.Sprintf("tool %q was called %d times in this turn", c.GetName(), n)
		}
	}
	sort.Strings(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\x00")))
	h := hex.EncodeToString(sum[:8])
	d.window = append(d.window, h)
	if len(d.window) > d.cfg.Window {
		d.window = d.window[len(d.window)-d.cfg.Window:]
	}
	n := 0
	for _, w := range d.window {
		if w == h {
			n++
		}
	}
	sort.Strings(names)
	switch {
	case n >= d.cfg.HardLimit:
		return loopHard, fmt.Sprintf("the same tool calls (%s) were repeated %d times", strings.Join(names, ", "), n)
	case verdict == loopHard:
		return loopHard, why
	case n >= d.cfg.WarnThreshold:
		return loopWarn, fmt.Sprintf("the same tool calls (%s) were repeated %d times", strings.Join(names, ", "), n)
	}
	return verdict, why
}

var salientArgs = []string{"path", "url", "query", "command", "pattern", "glob", "cmd"}

// pagingArgs are the arguments that name which part of a result a call
// reads (read_file's own, and the usual names of paging tools: MCP
// filesystem head/tail, fetch start_index/max_length, cursors and offsets).
// They are part of a call's key next to the salient arguments: two pages
// of one path or URL are different calls, the same page twice is the same.
var pagingArgs = []string{"start_line", "end_line", "start_char", "start_index", "max_length", "offset", "limit",
	"line", "lines", "head", "tail", "page", "page_size", "cursor", "start", "end", "from", "to"}

// LoopKey is the key the loop guard gives call c: two calls with the same
// key are the same call for the repeated-call detection. read_file is keyed
// by its exact page (path, start_line, start_char, end_line, absent as
// their defaults 1, 0 and none): following read_file's page notes never
// repeats a key, reading one page again does
// (docs/architecture.md §3.3 loop detection). Other tools are keyed by
// their salient and paging arguments; write_file and str_replace by all.
func LoopKey(c *runtimev1.ToolCall) string { return callKey(c) }

func callKey(c *runtimev1.ToolCall) string {
	f := c.GetArguments().GetFields()
	switch c.GetName() {
	case "read_file":
		num := func(k string, def float64) string {
			v, ok := f[k]
			if !ok {
				return fmt.Sprint(def)
			}
			if _, isNum := v.GetKind().(*structpb.Value_NumberValue); isNum {
				return fmt.Sprint(v.GetNumberValue())
			}
			b, _ := protojson.Marshal(v) // refused by read_file; still its own key
			return string(b)
		}
		end := "-"
		if _, ok := f["end_line"]; ok {
			end = num("end_line", 0)
		}
		return fmt.Sprintf("read_file|%s|line %s|char %s|end %s", f["path"].GetStringValue(), num("start_line", 1), num("start_char", 0), end)
	case "write_file", "str_replace":
		return c.GetName() + "|" + canonicalArgs(c)
	}
	var parts []string
	for _, k := range salientArgs {
		if v, ok := f[k]; ok {
			b, _ := protojson.Marshal(v)
			parts = append(parts, k+"="+string(b))
		}
	}
	if len(parts) == 0 {
		return c.GetName() + "|" + canonicalArgs(c)
	}
	for _, k := range pagingArgs {
		if v, ok := f[k]; ok {
			b, _ := protojson.Marshal(v)
			parts = append(parts, k+"="+string(b))
		}
	}
	return c.GetName() + "|" + strings.Join(parts, "|")
}

func canonicalArgs(c *runtimev1.ToolCall) string {
	if c.GetArguments() == nil {
		return "raw:" + c.GetRawArguments()
	}
	b, _ := protojson.Marshal(c.GetArguments())
	return string(b)
}

// clarificationText renders an ask_clarification call as the readable
// question shown to the user and stored as the tool result
// (docs/deerflow.md §6.2 Clarification, v1 forms: question, context, options).
func clarificationText(c *runtimev1.ToolCall) string {
	f := c.GetArguments().GetFields()
	q := strings.TrimSpace(f["question"].GetStringValue())
	if q == "" {
		q = "Could you clarify what you need?"
	}
	q = truncateRunes(q, 2000)
	var b strings.Builder
	if ctx := strings.TrimSpace(f["context"].GetStringValue()); ctx != "" {
		b.WriteString(truncateRunes(ctx, 2000))
		b.WriteString("\n\n")
	}
	b.WriteString(q)
	opts := f["options"].GetListValue().GetValues()
	for i, o := range opts {
		if i == 24 {
			break
		}
		s := o.GetStringValue()
		if s == "" {
			b2, _ := protojson.Marshal(o)
			s = string(b2)
		}
		fmt.Fprintf(&b, "\n%d. %s", i+1, truncateRunes(s, 200))
	}
	return b.String()
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

func appendText(content, note string) string {
	if strings.TrimSpace(content) == "" {
		return note
	}
	return content + "\n\n" + note
}
