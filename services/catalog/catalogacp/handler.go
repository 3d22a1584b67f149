package catalogacp

import (
	"context"
	"fmt"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// handler is the client side of the connection: it receives session/update
// notifications and answers session/request_permission. File-system and
// terminal requests are refused (the capabilities are off at initialize).
type handler struct {
	autoApprove bool

	mu      sync.Mutex
	session acp.SessionId
	col     *collector
}

var _ acp.Client = (*handler)(nil)

func (h *handler) begin(s acp.SessionId, col *collector) {
	h.mu.Lock()
	h.session, h.col = s, col
	h.mu.Unlock()
}

func (h *handler) end() {
	h.mu.Lock()
	h.col = nil
	h.mu.Unlock()
}

// emit hands an update of session s to the current turn (updates outside
// a turn, or of another session, are dropped).
func (h *handler) emit(s acp.SessionId, u Update) {
	h.mu.Lock()
	col := h.col
	ok := col != nil && s == h.session
	h.mu.Unlock()
	if ok {
		col.add(u)
	}
}

// SessionUpdate implements acp.Client.
func (h *handler) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil {
			h.emit(n.SessionId, Update{Kind: UpdateMessage, Text: t.Text})
		}
	case u.AgentThoughtChunk != nil:
		if t := u.AgentThoughtChunk.Content.Text; t != nil {
			h.emit(n.SessionId, Update{Kind: UpdateThought, Text: t.Text})
		}
	case u.ToolCall != nil:
		h.emit(n.SessionId, Update{Kind: UpdateToolCall, Text: fmt.Sprintf("%s (%s)", u.ToolCall.Title, statusOr(string(u.ToolCall.Status), "pending"))})
	case u.ToolCallUpdate != nil:
		st := ""
		if u.ToolCallUpdate.Status != nil {
			st = string(*u.ToolCallUpdate.Status)
		}
		title := string(u.ToolCallUpdate.ToolCallId)
		if u.ToolCallUpdate.Title != nil {
			title = *u.ToolCallUpdate.Title
		}
		h.emit(n.SessionId, Update{Kind: UpdateToolStatus, Text: fmt.Sprintf("%s: %s", title, statusOr(st, "updated"))})
	case u.Plan != nil:
		var items []string
		for _, e := range u.Plan.Entries {
			items = append(items, fmt.Sprintf("[%s] %s", e.Status, e.Content))
		}
		h.emit(n.SessionId, Update{Kind: UpdatePlan, Text: strings.Join(items, "\n")})
	}
	return nil
}

func statusOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RequestPermission implements acp.Client: with auto_approve_permissions
// the first allow_once option, else the first reject_once option, else
// the outcome "cancelled". allow_always is never chosen, so no approval
// outlives the request (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
func (h *handler) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	want := acp.PermissionOptionKindRejectOnce
	if h.autoApprove {
		want = acp.PermissionOptionKindAllowOnce
	}
	title := string(p.ToolCall.ToolCallId)
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	for _, o := range p.Options {
		if o.Kind == want {
			h.emit(p.SessionId, Update{Kind: UpdatePermission, Text: fmt.Sprintf("%s: %s (%s)", title, o.Kind, o.OptionId)})
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	h.emit(p.SessionId, Update{Kind: UpdatePermission, Text: title + ": cancelled (no " + string(want) + " option)"})
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

func refused(method string) error {
	return acp.NewMethodNotFound(method)
}

// ReadTextFile implements acp.Client (capability off).
func (h *handler) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, refused(acp.ClientMethodFsReadTextFile)
}

// WriteTextFile implements acp.Client (capability off).
func (h *handler) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, refused(acp.ClientMethodFsWriteTextFile)
}

// CreateTerminal implements acp.Client (capability off).
func (h *handler) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, refused(acp.ClientMethodTerminalCreate)
}

// KillTerminal implements acp.Client (capability off).
func (h *handler) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, refused(acp.ClientMethodTerminalKill)
}

// TerminalOutput implements acp.Client (capability off).
func (h *handler) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, refused(acp.ClientMethodTerminalOutput)
}

// ReleaseTerminal implements acp.Client (capability off).
func (h *handler) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, refused(acp.ClientMethodTerminalRelease)
}

// WaitForTerminalExit implements acp.Client (capability off).
func (h *handler) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, refused(acp.ClientMethodTerminalWaitForExit)
}
