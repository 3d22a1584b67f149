package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

const errorDomain = "runtime.toolplane.dev"

// statusErr builds a status error with a google.rpc.ErrorInfo whose reason is
// the runtime ErrorReason name (docs/architecture.md §2, "Errors").
func statusErr(code codes.Code, reason runtimev1.ErrorReason, format string, args ...any) error {
	st := status.New(code, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

func threadNotFound(id string) error {
	return statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_THREAD_NOT_FOUND, "thread %q not found", id)
}

func principalOf(ctx context.Context) *typev1.Principal {
	return runtimeident.Principal(ctx)
}

// ownThread loads a thread owned by the request's effective principal; a
// thread of anyone else is NOT_FOUND (never PERMISSION_DENIED, so ids do
// not leak).
func (s *Server) ownThread(ctx context.Context, id string) (*runtimestore.Thread, *typev1.Principal, error) {
	p := principalOf(ctx)
	t, err := s.store.GetThread(ctx, id)
	if errors.Is(err, runtimestore.ErrNotFound) {
		return nil, nil, threadNotFound(id)
	}
	if err != nil {
		return nil, nil, storeErr(err)
	}
	if t.Proto.GetOwnerSubject() != p.GetSubject() || t.Proto.GetOwnerTenant() != p.GetTenant() {
		return nil, nil, threadNotFound(id)
	}
	return t, p, nil
}

type loopKey struct{}

// inLoop returns ctx marked as the agent loop's own work (loopAdapter): a
// context value, which no request can carry, so only the runtime itself
// reaches a subagent's thread or names a run it is running.
func inLoop(ctx context.Context) context.Context { return context.WithValue(ctx, loopKey{}, true) }

func fromLoop(ctx context.Context) bool { v, _ := ctx.Value(loopKey{}).(bool); return v }

// actThread is ownThread for the RPCs that act on a thread's tools and
// runs (AssembleTools, ExecuteToolCall(Stream), RunTurn, ResumeRun): a
// subagent's thread is NOT_FOUND unless the agent loop itself asks, so a
// user cannot run tools with is_subagent=true (docs/architecture.md §5,
// "Call context"). Reading a child thread (GetThread, ListMessages,
// ListRuns) stays possible through ownThread.
func (s *Server) actThread(ctx context.Context, id string) (*runtimestore.Thread, error) {
	th, _, err := s.ownThread(ctx, id)
	if err != nil {
		return nil, err
	}
	if th.Child != nil && !fromLoop(ctx) {
		return nil, threadNotFound(id)
	}
	return th, nil
}

// checkRun checks the run_id of a tool call from a request: empty is a
// client-side loop (no run); otherwise it must name a RUNNING run of the
// thread, else NOT_FOUND (RUN_NOT_FOUND) — a caller cannot attach a call to
// a run that is not in progress, nor invent one. The agent loop's own
// calls are not checked (it names the run it runs).
func (s *Server) checkRun(ctx context.Context, threadID, runID string) error {
	if runID == "" || fromLoop(ctx) {
		return nil
	}
	r, err := s.store.GetRun(ctx, threadID, runID)
	if errors.Is(err, runtimestore.ErrNotFound) || (err == nil && r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING) {
		return statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_RUN_NOT_FOUND, "run_id: no running run %q in thread %q (leave run_id empty for a client-side loop)", runID, threadID)
	}
	if err != nil {
		return storeErr(err)
	}
	return nil
}

// Workspace virtual roots (docs/deerflow.md §6.2 ThreadData).
var workspaceDirs = runtimetools.WorkspaceDirs

// CreateThread creates a thread owned by the caller's effective principal,
// with its workspace <data dir>/runtime/threads/<id>/user-data/{workspace,outputs,uploads}.
// The agent must exist (empty = the default agent). Metadata is free text
// and never read as state: it cannot activate skills or promote tools.
//
// A request that names no agent gets the caller's per-credential default:
// the principal attribute DefaultAgentAttribute (`auth.tokens[].attributes.agent`,
// or the JWT attributes claim), else the default agent. This is how an MCP
// client without --agent gets its tool profile (docs/architecture.md §5).
func (s *Server) CreateThread(ctx context.Context, req *runtimev1.CreateThreadRequest) (*runtimev1.CreateThreadResponse, error) {
	agent := req.GetAgent()
	if agent == "" {
		agent = principalOf(ctx).GetAttributes()[DefaultAgentAttribute]
	}
	th, err := s.createThread(ctx, agent, req.GetMetadata(), nil)
	if err != nil {
		return nil, err
	}
	return &runtimev1.CreateThreadResponse{Thread: th.Proto}, nil
}

// DefaultAgentAttribute is the principal attribute naming the agent of a
// thread created without one (a per-token default agent).
const DefaultAgentAttribute = "agent"

// createThread creates a thread of the caller; child is nil except for the
// agent loop's subagent threads (never taken from a request).
func (s *Server) createThread(ctx context.Context, agent string, md map[string]string, child *runtimestore.Child) (*runtimestore.Thread, error) {
	if agent != "" && !s.agents.reserved(agent) && child == nil { // a child uses its override
		a, err := s.store.GetAgent(ctx, agent)
		if err == nil && !visibleTo(ctx, a) {
			err = runtimestore.ErrNotFound // another user's agent (docs/decisions/0152-owned-agents.md)
		}
		if errors.Is(err, runtimestore.ErrNotFound) {
			return nil, statusErr(codes.NotFound, runtimev1.ErrorReason_ERROR_REASON_AGENT_NOT_FOUND, "agent: %q not found", agent)
		} else if err != nil {
			return nil, storeErr(err)
		}
	}
	p := principalOf(ctx)
	now := timestamppb.New(s.now())
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{
		ThreadId: uuid.NewString(), Agent: agent, OwnerSubject: p.GetSubject(), OwnerTenant: p.GetTenant(),
		CreateTime: now, UpdateTime: now, Metadata: md, TokenUsage: &runtimev1.TokenUsage{},
	}, ReadMarks: map[string]string{}, Child: child}
	for _, d := range workspaceDirs {
		if err := os.MkdirAll(filepath.Join(s.ws.ThreadDir(th.Proto.ThreadId), "user-data", d), 0o700); err != nil {
			return nil, grpcx.Internal(errorDomain, runtimev1.ErrorReason_ERROR_REASON_INTERNAL.String(), fmt.Errorf("workspace: %w", err))
		}
	}
	if err := s.store.CreateThread(ctx, th); err != nil {
		_ = os.RemoveAll(s.ws.ThreadDir(th.Proto.ThreadId))
		return nil, storeErr(err)
	}
	return th, nil
}

// ListThreads lists the caller's threads, newest first. Subagent threads
// (created by the agent loop for task calls) are hidden: they are reached
// by id — the task result's child_thread_id, or the parent's
// toolplane.parent_thread_id metadata on the child — with GetThread,
// ListMessages and ListRuns, and are removed by retention like any thread.
func (s *Server) ListThreads(ctx context.Context, req *runtimev1.ListThreadsRequest) (*runtimev1.ListThreadsResponse, error) {
	p := principalOf(ctx)
	size := int(req.GetPageSize())
	if size == 0 {
		size = 50
	}
	ths, next, err := s.store.ListThreads(ctx, p.GetTenant(), p.GetSubject(), runtimestore.Page{Limit: size, Token: req.GetPageToken()})
	if err != nil {
		return nil, invalid("page_token", grpcx.ViolationInvalid, "%v", err)
	}
	resp := &runtimev1.ListThreadsResponse{NextPageToken: next}
	for _, t := range ths {
		resp.Threads = append(resp.Threads, t.Proto)
	}
	return resp, nil
}

// GetThread returns one of the caller's threads.
func (s *Server) GetThread(ctx context.Context, req *runtimev1.GetThreadRequest) (*runtimev1.GetThreadResponse, error) {
	t, _, err := s.ownThread(ctx, req.GetThreadId())
	if err != nil {
		return nil, err
	}
	return &runtimev1.GetThreadResponse{Thread: t.Proto}, nil
}

// DeleteThread deletes one of the caller's threads with its messages, runs,
// events and workspace (artifacts included), and with it the subagent
// threads it delegated to (hidden from ListThreads, so they would
// otherwise be left behind), children first.
func (s *Server) DeleteThread(ctx context.Context, req *runtimev1.DeleteThreadRequest) (*runtimev1.DeleteThreadResponse, error) {
	if _, _, err := s.ownThread(ctx, req.GetThreadId()); err != nil {
		return nil, err
	}
	if err := s.deleteTree(ctx, req.GetThreadId(), 0); err != nil {
		return nil, err
	}
	return &runtimev1.DeleteThreadResponse{}, nil
}

// deleteTree deletes a thread's subagent threads (recursively, at most 8
// levels) and then the thread itself, each with its workspace.
func (s *Server) deleteTree(ctx context.Context, id string, depth int) error {
	if depth < 8 {
		kids, err := s.store.ChildThreads(ctx, id)
		if err != nil {
			return storeErr(err)
		}
		for _, k := range kids {
			if err := s.deleteTree(ctx, k, depth+1); err != nil {
				return err
			}
		}
	}
	if err := s.store.DeleteThread(ctx, id); err != nil && !errors.Is(err, runtimestore.ErrNotFound) {
		return storeErr(err)
	}
	if err := os.RemoveAll(s.ws.ThreadDir(id)); err != nil {
		return grpcx.Internal(errorDomain, runtimev1.ErrorReason_ERROR_REASON_INTERNAL.String(), fmt.Errorf("workspace: %w", err))
	}
	return nil
}

// ListMessages pages a thread's conversation, oldest first.
func (s *Server) ListMessages(ctx context.Context, req *runtimev1.ListMessagesRequest) (*runtimev1.ListMessagesResponse, error) {
	if _, _, err := s.ownThread(ctx, req.GetThreadId()); err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = 100
	}
	msgs, next, err := s.store.ListMessages(ctx, req.GetThreadId(), runtimestore.Page{Limit: size, Token: req.GetPageToken()})
	if err != nil {
		return nil, invalid("page_token", grpcx.ViolationInvalid, "%v", err)
	}
	return &runtimev1.ListMessagesResponse{Messages: msgs, NextPageToken: next}, nil
}
