package runtimetools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

// maxACPPrompt bounds the prompt sent to an ACP agent (the catalog's limit).
const maxACPPrompt = 256 << 10

// invokeACP implements invoke_acp_agent {agent, prompt}: one ACP prompt
// turn through catalog InvokeAcpAgent in the thread's ACP workspace,
// relaying the agent's updates as MCP logging notifications when the call
// streams, and returning the agent's final text. Cancelling ctx (run
// cancelled, runtime.tool_call_timeout) cancels the stream, which makes the
// catalog send session/cancel (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
func (s *Dispatcher) invokeACP(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	t := ec.Tool()
	agent, prompt := strArg(ec.Args, "agent"), strArg(ec.Args, "prompt")
	switch {
	case !slices.Contains(t.ACPAgents, agent):
		return nil, runtimechain.Business("agent must be one of %s, got %q", strings.Join(t.ACPAgents, ", "), agent)
	case strings.TrimSpace(prompt) == "":
		return nil, runtimechain.Business("prompt is required")
	case len(prompt) > maxACPPrompt:
		return nil, runtimechain.Business("prompt is longer than %d bytes", maxACPPrompt)
	}
	// The catalog never creates a thread folder (decision 0150): make sure
	// it exists before the catalog looks for it.
	r, err := s.ws.Root(ec.ThreadID())
	if err != nil {
		return nil, err
	}
	r.Close()
	cc := runtimeident.CallContext(ec.Thread, ec.View.Base.Agent, ec.RunID, ec.CallID)
	cctx, cancel := context.WithTimeout(runtimeident.ActingFor(ctx), s.cfg.ToolCallTimeout)
	defer cancel()
	stream, err := s.catalog.InvokeAcpAgent(cctx, &catalogv1.InvokeAcpAgentRequest{Agent: agent, Prompt: prompt, CallContext: cc, Timeout: durationpb.New(s.cfg.ToolCallTimeout)})
	if err != nil {
		return nil, acpFailure(agent, err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("ACP agent %s: the catalog ended the stream without a result", agent)
		}
		if err != nil {
			return nil, acpFailure(agent, err)
		}
		if u := m.GetUpdate(); u != nil {
			if ec.Notify != nil {
				ec.Notify(acpNotification(agent, u))
			}
			continue
		}
		r := m.GetResult()
		text := r.GetText()
		if text == "" {
			text = "(the agent returned no text)"
		}
		if sr := r.GetStopReason(); sr != "" && sr != "end_turn" {
			text += fmt.Sprintf("\n[ACP agent %s stopped: %s]", agent, sr)
		}
		return &runtimechain.Outcome{Text: text}, nil
	}
}

// acpNotification is an update as an MCP logging notification
// (notifications/message), the shape streamed MCP calls relay.
func acpNotification(agent string, u *catalogv1.AcpUpdate) *typev1.Notification {
	p, _ := structpb.NewStruct(map[string]any{"level": "info", "logger": "acp:" + agent, "data": u.GetKind() + ": " + u.GetText()})
	return &typev1.Notification{Method: "notifications/message", Params: p}
}

// acpFailure maps a catalog error: what the model can act on is a
// BUSINESS error, the rest a RUNTIME failure.
func acpFailure(agent string, err error) error {
	switch status.Code(err) {
	case codes.NotFound, codes.FailedPrecondition, codes.InvalidArgument:
		return runtimechain.Business("ACP agent %s: %s", agent, status.Convert(err).Message())
	}
	return runtimechain.UpstreamFailure("catalog", err)
}
