package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogacp"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// maxACPPromptBytes bounds an InvokeAcpAgent prompt.
const maxACPPromptBytes = 256 << 10

// startACP resolves catalog.acp_agents ($VAR from the host) and creates the
// per-(agent, thread) pool (docs/decisions/0150-where-acp-and-workspace-servers-run.md).
func (s *Server) startACP() error {
	if len(s.cfg.ACPAgents) == 0 {
		return nil
	}
	agents := make(map[string]catalogacp.Agent, len(s.cfg.ACPAgents))
	for _, n := range slices.Sorted(maps.Keys(s.cfg.ACPAgents)) {
		a := s.cfg.ACPAgents[n]
		// The stdio command policy of MCP servers (docs/architecture.md
		// §10.4) applies to ACP agents too, unless
		// catalog.file_command_policy is off; checked on the configuration
		// as written ($VAR unresolved), before any process starts.
		if s.cfg.FileCommandPolicy != "off" {
			if err := catalogconfig.ValidateStdioCommand("catalog.acp_agents."+n, a.Command, a.Args, a.Env, s.cfg.StdioAllowlist); err != nil {
				return fmt.Errorf("%w (the stdio command policy: catalog.stdio_allowlist, catalog.file_command_policy)", err)
			}
		}
		r, err := a.Resolve("catalog.acp_agents."+n, os.LookupEnv)
		if err != nil {
			return err
		}
		agents[n] = r
	}
	abs := threadsDir(s.cfg, s.env)
	if abs == "" {
		return errors.New("catalog.workspaces.dir: required with catalog.acp_agents when there is no data directory")
	}
	s.acp = catalogacp.NewPool(catalogacp.PoolConfig{
		Agents: agents, ThreadsDir: abs,
		MaxLive: s.cfg.Sessions.MaxScoped, IdleTTL: s.cfg.Sessions.IdleTTL,
		Options: catalogacp.Options{CloseGrace: s.cfg.CloseGrace},
	})
	return nil
}

// ListAcpAgents lists the configured ACP agents without command or env.
func (s *Server) ListAcpAgents(context.Context, *catalogv1.ListAcpAgentsRequest) (*catalogv1.ListAcpAgentsResponse, error) {
	out := &catalogv1.ListAcpAgentsResponse{}
	if s.acp == nil {
		return out, nil
	}
	for _, n := range s.acp.Names() {
		a, _ := s.acp.Agent(n)
		out.Agents = append(out.Agents, &catalogv1.AcpAgent{Name: n, Description: a.Description, Model: a.Model, AutoApprovePermissions: a.AutoApprovePermissions})
	}
	return out, nil
}

// InvokeAcpAgent runs one prompt turn in the ACP workspace of the trusted
// CallContext's thread, streaming updates, then the result.
func (s *Server) InvokeAcpAgent(req *catalogv1.InvokeAcpAgentRequest, stream grpc.ServerStreamingServer[catalogv1.InvokeAcpAgentResponse]) error {
	ctx := stream.Context()
	if s.acp == nil {
		return acpNotFound(req.GetAgent(), nil)
	}
	if _, ok := s.acp.Agent(req.GetAgent()); !ok {
		return acpNotFound(req.GetAgent(), s.acp.Names())
	}
	thread := auth.TrustedCallContext(ctx, req.GetCallContext()).GetThreadId()
	if thread == "" {
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE, nil,
			"ACP agent %q: the call has no trusted thread id (call_context.thread_id from a service credential)", req.GetAgent())
	}
	timeout := s.cfg.DefaultToolCallTimeout
	if d := req.GetTimeout(); d != nil && d.AsDuration() > 0 {
		timeout = d.AsDuration()
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	var mu sync.Mutex
	done := false
	onUpdate := func(u catalogacp.Update) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = stream.Send(&catalogv1.InvokeAcpAgentResponse{Event: &catalogv1.InvokeAcpAgentResponse_Update{Update: &catalogv1.AcpUpdate{Kind: string(u.Kind), Text: u.Text}}})
		}
	}
	res, err := s.acp.Invoke(cctx, req.GetAgent(), thread, req.GetPrompt(), onUpdate)
	mu.Lock()
	done = true
	mu.Unlock()
	if err != nil {
		return s.acpError(ctx, cctx, req.GetAgent(), err)
	}
	return stream.Send(&catalogv1.InvokeAcpAgentResponse{Event: &catalogv1.InvokeAcpAgentResponse_Result{Result: &catalogv1.AcpResult{
		Text: res.Text, StopReason: res.StopReason, WorkingDirectory: catalogacp.ACPWorkspaceDir}}})
}

func acpNotFound(name string, names []string) error {
	return statusErr(codes.NotFound, catalogv1.ErrorReason_ERROR_REASON_ACP_AGENT_NOT_FOUND, map[string]string{"name": name},
		"no ACP agent named %q (configured: %v)", name, names)
}

// acpError maps a failed turn to a status; the agent's stderr tail (which
// may hold anything the agent printed) stays in the catalog's log.
func (s *Server) acpError(ctx, cctx context.Context, agent string, err error) error {
	switch {
	case errors.Is(err, catalogacp.ErrNoThreadWorkspace):
		return statusErr(codes.FailedPrecondition, catalogv1.ErrorReason_ERROR_REASON_THREAD_WORKSPACE_UNAVAILABLE, nil, "ACP agent %q: %v", agent, err)
	case errors.Is(context.Cause(cctx), errCallTimeout) && ctx.Err() == nil:
		return statusErr(codes.DeadlineExceeded, catalogv1.ErrorReason_ERROR_REASON_CALL_TIMEOUT, nil, "ACP agent %q: the turn timed out (cancelled)", agent)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	s.log.Warn("ACP agent turn failed", "agent", agent, "err", err)
	what := "failed"
	if errors.Is(err, catalogacp.ErrExited) {
		what = "exited during the turn"
	}
	return statusErr(codes.Unavailable, catalogv1.ErrorReason_ERROR_REASON_ACP_AGENT_UNAVAILABLE, nil,
		"ACP agent %q %s; it is restarted on the next call (details in the catalog log)", agent, what)
}

// threadsDir is catalog.workspaces.dir as an absolute path (default
// <data dir>/runtime/threads, the runtime's own folder in one process);
// "" when neither is known.
func threadsDir(cfg Config, env svckit.Env) string {
	dir := cfg.Workspaces.Dir
	if dir == "" {
		if env.DataDir == "" {
			return ""
		}
		dir = filepath.Join(env.DataDir, "runtime", "threads")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	return abs
}
