package runtimechain

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Call is one tool call in flight. Steps read it and may fill it in (the
// assembly step sets View, argument decoding sets Args and ArgsPB).
type Call struct {
	// Thread is the caller's own thread.
	Thread *runtimestore.Thread
	// View is the thread's tool view for this call (nil until the
	// assembly step ran, or when assembly failed).
	View *runtimeassembly.View
	// Name and CallID are the model's tool name and call id (never empty:
	// "unknown_tool" and "missing_tool_call_id" stand in).
	Name, CallID string
	// RunID is the agent-loop run, "" outside RunTurn.
	RunID string
	// RawArguments is the JSON text of the arguments when they came as text.
	RawArguments string
	// ArgsPB and Args are the decoded arguments.
	ArgsPB *structpb.Struct
	Args   map[string]any
	// Notify relays MCP progress and log notifications (streaming only).
	Notify func(*typev1.Notification)
	// Profile is the provider form the model saw the tools in
	// (ExecuteToolCallRequest.profile); the map_arguments step maps the
	// name and arguments back from it.
	Profile runtimev1.ToolProfile
	// BoundName is the tool name as the model called it, when the
	// map_arguments step mapped it onto the tool's own name ("" = same).
	BoundName string
}

// NewCall starts a call from the request's ToolCall.
func NewCall(th *runtimestore.Thread, runID string, tc *runtimev1.ToolCall, notify func(*typev1.Notification)) *Call {
	c := &Call{Thread: th, Name: tc.GetName(), CallID: tc.GetId(), RunID: runID, ArgsPB: tc.GetArguments(), RawArguments: tc.GetRawArguments(), Notify: notify}
	if c.CallID == "" {
		c.CallID = "missing_tool_call_id"
	}
	if c.Name == "" {
		c.Name = "unknown_tool"
	}
	return c
}

// ThreadID is the id of the call's thread.
func (c *Call) ThreadID() string { return c.Thread.Proto.GetThreadId() }

// Tool returns the assembled tool of the call's name, nil when unknown or
// before assembly.
func (c *Call) Tool() *runtimeassembly.Tool {
	if c.View == nil {
		return nil
	}
	return c.View.Base.ByName[c.Name]
}

// IsToolSearch reports whether the call is tool_search over a non-empty
// deferred set (the only case in which tool_search exists).
func (c *Call) IsToolSearch() bool {
	return c.View != nil && c.Name == runtimeassembly.ToolSearchName && c.View.Base.HasDeferred()
}

// Source is the call's tool source for metrics ("unknown" when none).
func (c *Call) Source() string {
	if c.IsToolSearch() {
		return runtimeassembly.SourceBuiltin
	}
	if t := c.Tool(); t != nil {
		return t.Source
	}
	return "unknown"
}

// ReadMark is a read_file mark (path, SHA-256 of the full content).
type ReadMark struct{ Path, Digest string }

// Outcome is what the chain produced for a call, with the state update it
// implies (committed atomically with the result by the runtime).
type Outcome struct {
	// Text is the result text (unused when Content is set).
	Text string
	// Content are MCP result blocks.
	Content    []*typev1.ContentBlock
	Structured *structpb.Struct
	// Kind is the failure kind; UNSPECIFIED = success.
	Kind runtimev1.ErrorKind
	// Reason is the POLICY reason code.
	Reason    string
	Artifacts []*runtimev1.Artifact
	Promoted  *runtimev1.Promoted
	ReadMark  *ReadMark
	Activate  *runtimev1.ActiveSkill
	// ProviderOutput is the result's provider-native form (tool_search's
	// tool_reference blocks for anthropic_messages).
	ProviderOutput *structpb.Struct
	// Placement is where the catalog ran a placed MCP tool
	// (docs/decisions/0086-session-placement.md); nil for other tools.
	Placement *runtimev1.ToolPlacement
}

// RecoverySentence ends RUNTIME and some POLICY failures.
const RecoverySentence = "Continue with the information you have, or try a different approach or tool."

// maxDetail bounds error details (docs/deerflow.md §7).
const maxDetail = 500

// TruncDetail trims s and bounds it to 500 runes.
func TruncDetail(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= maxDetail {
		return s
	}
	r := []rune(s)
	return string(r[:maxDetail-3]) + "..."
}

// PolicyErr is a POLICY outcome (we refused) with its reason code.
func PolicyErr(reason, format string, args ...any) *Outcome {
	return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_POLICY, Reason: reason, Text: fmt.Sprintf(format, args...)}
}

// BusinessError is a tool-level failure reported to the model as
// `Error: ...` (a BUSINESS outcome the model can fix).
type BusinessError struct{ Msg string }

// Error returns the message.
func (e *BusinessError) Error() string { return e.Msg }

// Business returns a *BusinessError.
func Business(format string, args ...any) error {
	return &BusinessError{Msg: fmt.Sprintf(format, args...)}
}

// UpstreamFailure wraps an upstream error as a RUNTIME failure of the tool.
func UpstreamFailure(svc string, err error) error {
	return fmt.Errorf("%s %s: %s", svc, status.Code(err), status.Convert(err).Message())
}

// TextOf joins the text blocks of content.
func TextOf(blocks []*typev1.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
			parts = append(parts, b.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

// Result renders the outcome as the call's ToolResult.
func (o *Outcome) Result(c *Call) *runtimev1.ToolResult {
	res := &runtimev1.ToolResult{ToolCallId: c.CallID, Name: c.Name, Status: runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS,
		ErrorKind: o.Kind, ReasonCode: o.Reason, Artifacts: o.Artifacts, Promoted: o.Promoted, StructuredContent: o.Structured, Content: o.Content, ProviderOutput: o.ProviderOutput,
		Placement: o.Placement}
	if o.Kind != runtimev1.ErrorKind_ERROR_KIND_UNSPECIFIED {
		res.Status = runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR
	}
	if res.Content == nil {
		// Files and command output may hold any bytes; protobuf strings must
		// be UTF-8, so invalid sequences become U+FFFD.
		res.Content = []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: strings.ToValidUTF8(o.Text, "\uFFFD")}}
	}
	return res
}

// Apply applies the outcome's state update to a thread inside the store's
// write transaction: promotions through the hash-checked reducer,
// artifacts, the read mark and a skill activation.
func (o *Outcome) Apply(t *runtimestore.Thread) {
	if o.Promoted != nil {
		t.Proto.Promoted = runtimestore.MergePromoted(t.Proto.Promoted, o.Promoted)
	}
	if len(o.Artifacts) > 0 {
		t.Proto.Artifacts = runtimestore.MergeArtifacts(t.Proto.Artifacts, o.Artifacts)
	}
	if o.ReadMark != nil {
		t.ReadMarks[o.ReadMark.Path] = o.ReadMark.Digest
	}
	if a := o.Activate; a != nil {
		t.Proto.ActiveSkills = slices.DeleteFunc(t.Proto.ActiveSkills, func(x *runtimev1.ActiveSkill) bool {
			return x.GetSource() == a.GetSource() && x.GetPath() == a.GetPath()
		})
		t.Proto.ActiveSkills = append(t.Proto.ActiveSkills, a)
	}
}
