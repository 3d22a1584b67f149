// Package runtimetools holds the runtime's own tool implementations — the
// thread workspace and its file tools (read_file, write_file, ls,
// str_replace, glob, grep, bash), the built-ins (tool_search, ask_clarification,
// present_files, describe_skill, review_skill_package) — and the
// Dispatcher that the tool-call chain's dispatch step calls (built-in,
// config tool, or catalog CallTool for MCP tools; docs/architecture.md
// §3.2).
package runtimetools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Catalog is what the tools need of the catalog service.
type Catalog interface {
	CallTool(ctx context.Context, in *catalogv1.CallToolRequest, opts ...grpc.CallOption) (*catalogv1.CallToolResponse, error)
	CallToolStream(ctx context.Context, in *catalogv1.CallToolStreamRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[catalogv1.CallToolStreamResponse], error)
	SearchTools(ctx context.Context, in *catalogv1.SearchToolsRequest, opts ...grpc.CallOption) (*catalogv1.SearchToolsResponse, error)
	InvokeAcpAgent(ctx context.Context, in *catalogv1.InvokeAcpAgentRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[catalogv1.InvokeAcpAgentResponse], error)
}

// Skills is what the tools need of the skills service.
type Skills interface {
	DescribeSkills(ctx context.Context, in *skillsv1.DescribeSkillsRequest, opts ...grpc.CallOption) (*skillsv1.DescribeSkillsResponse, error)
	ReadSkillFile(ctx context.Context, in *skillsv1.ReadSkillFileRequest, opts ...grpc.CallOption) (*skillsv1.ReadSkillFileResponse, error)
	ReviewSkillPackage(ctx context.Context, in *skillsv1.ReviewSkillPackageRequest, opts ...grpc.CallOption) (*skillsv1.ReviewSkillPackageResponse, error)
	ManageSkill(ctx context.Context, in *skillsv1.ManageSkillRequest, opts ...grpc.CallOption) (*skillsv1.ManageSkillResponse, error)
}

// Assembly is what tool_search and the skill tools need of the assembly
// pipeline (implemented by runtimeassembly.Builder).
type Assembly interface {
	Build(ctx context.Context, th *runtimestore.Thread) (*runtimeassembly.Base, error)
	View(ctx context.Context, th *runtimestore.Thread, b *runtimeassembly.Base) *runtimeassembly.View
	Invalidate()
	SkillAccess(ctx context.Context, th *runtimestore.Thread, b *runtimeassembly.Base, name string) (*skillsv1.Skill, string)
}

// Settings are the configuration the tools read.
type Settings struct {
	// AllowBash is runtime.allow_bash.
	AllowBash bool
	// ToolCallTimeout is runtime.tool_call_timeout (local tools and
	// streamed MCP calls).
	ToolCallTimeout time.Duration
	// SearchLimit is runtime.tool_search.search_limit.
	SearchLimit int
	// MaxMessageBytes is server.max_message_bytes (bounds a review upload).
	MaxMessageBytes int
	// FileMaxBytes is runtime.limits.workspace.file_max_bytes (0: unbounded).
	FileMaxBytes int64
	// ThreadQuotaBytes is runtime.limits.workspace.thread_quota_bytes (0: unbounded).
	ThreadQuotaBytes int64
	// Web configures web_fetch and web_search (runtime.web; nil: off).
	Web *WebSettings
	// ReadPageChars is the output budget when read_file is exempt from
	// externalisation (runtime.tool_output; 0: no cap here). read_file
	// returns at most one character more than it: the budget's pager
	// (runtimechain.OutputBudget) cuts that to a page and writes the note,
	// and nothing past it would reach the model anyway.
	ReadPageChars int
}

// Deps are the Dispatcher's narrow dependencies.
type Deps struct {
	Workspace *Workspace
	Catalog   Catalog
	Skills    Skills
	Assembly  Assembly
	Now       func() time.Time
	Log       *slog.Logger
	// Promotions counts promoted names by origin (nil: not recorded).
	Promotions *prometheus.CounterVec
	// Agents changes and creates owned agents (update_agent, setup_agent).
	Agents Agents
}

// Dispatcher runs the tool of a call; it implements runtimechain.ToolCaller.
type Dispatcher struct {
	cfg        Settings
	ws         *Workspace
	catalog    Catalog
	skills     Skills
	assembly   Assembly
	now        func() time.Time
	promotions *prometheus.CounterVec
	agents     Agents
	views      viewMemo   // candidate view ids of deferred sets (views.go)
	wsBound    sync.Map   // server name → boundEntry: runs in the thread's workspace (pathtranslate.go)
	placed     placements // replica of recent placement keys (placement.go)
}

var _ runtimechain.ToolCaller = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher.
func NewDispatcher(cfg Settings, d Deps) *Dispatcher {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Workspace != nil {
		d.Workspace.quota.Store(cfg.ThreadQuotaBytes) // saved results count too
	}
	return &Dispatcher{cfg: cfg, ws: d.Workspace, catalog: d.Catalog, skills: d.Skills, assembly: d.Assembly, now: d.Now, promotions: d.Promotions, agents: d.Agents}
}

// CallTool implements runtimechain.ToolCaller: tool_search, a config tool
// (under runtime.tool_call_timeout), a built-in, or an MCP tool through
// catalog CallTool (CallToolStream when the call relays notifications).
func (s *Dispatcher) CallTool(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	if ec.IsToolSearch() {
		return s.toolSearch(ctx, ec)
	}
	t := ec.Tool()
	if t == nil {
		return nil, fmt.Errorf("no implementation for %s", ec.Name)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ToolCallTimeout)
	defer cancel()
	switch t.Source {
	case runtimeassembly.SourceConfig:
		switch t.Use {
		case "file.read":
			return s.readFile(cctx, ec, ec.Args)
		case "file.write":
			return s.writeFile(cctx, ec, ec.Args)
		case "file.ls":
			return s.ls(cctx, ec, ec.Args)
		case "file.str_replace":
			return s.strReplace(cctx, ec, ec.Args)
		case "file.glob":
			return s.glob(cctx, ec, ec.Args)
		case "file.grep":
			return s.grep(cctx, ec, ec.Args)
		case "bash":
			return s.bash(cctx, ec, ec.Args)
		case "web.fetch":
			return s.webFetch(cctx, ec, ec.Args)
		case "web.search":
			return s.webSearch(cctx, ec, ec.Args)
		}
	case runtimeassembly.SourceBuiltin:
		switch t.Use {
		case runtimeassembly.AskClarification:
			return s.askClarification(ec)
		case runtimeassembly.PresentFiles:
			return s.presentFiles(cctx, ec, ec.Args)
		case runtimeassembly.DescribeSkill:
			return s.describeSkill(cctx, ec)
		case runtimeassembly.ReviewSkillPackage:
			return s.reviewSkill(cctx, ec)
		case runtimeassembly.ViewImage:
			return s.viewImage(cctx, ec)
		case runtimeassembly.TaskTool:
			return nil, runtimechain.Business("the task tool needs the agent loop (RunTurn); it cannot run through ExecuteToolCall")
		case runtimeassembly.SkillManage:
			return s.skillManage(cctx, ec)
		case runtimeassembly.ListUploadedFiles:
			return s.listUploadedFiles(cctx, ec)
		case runtimeassembly.UpdateAgent:
			return s.updateAgent(cctx, ec)
		case runtimeassembly.SetupAgent:
			return s.setupAgent(cctx, ec)
		}
	case runtimeassembly.SourceMCP:
		return s.callMCP(ctx, ec)
	case runtimeassembly.SourceACP:
		return s.invokeACP(ctx, ec)
	}
	return nil, fmt.Errorf("no implementation for %s", ec.Name)
}

// callMCP calls a catalog tool with the thread's CallContext, relaying
// notifications when streaming.
func (s *Dispatcher) callMCP(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	var placed *runtimev1.ToolPlacement
	resp, err := s.callWorkspaceAware(ctx, ec.ThreadID(), ec.Tool().Server, func(ctx context.Context) (*catalogv1.CallToolResponse, error) {
		r, pl, err := s.catalogCall(ctx, ec)
		placed = pl
		return r, err
	})
	if err != nil {
		return nil, err
	}
	o := &runtimechain.Outcome{Content: resp.GetContent(), Structured: resp.GetStructuredContent(), Placement: placed}
	if resp.GetIsError() {
		o.Kind = runtimev1.ErrorKind_ERROR_KIND_BUSINESS
		txt := runtimechain.TextOf(resp.GetContent())
		if !strings.HasPrefix(txt, "Error:") {
			o.Content = append([]*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "Error: the tool reported a failure."}}, o.Content...)
		}
	}
	return o, nil
}

// catalogCall is one catalog CallTool (CallToolStream when the call
// relays notifications), placed on the catalog replica of its scope
// (placement.go); the placement is nil for a shared server's tool.
func (s *Dispatcher) catalogCall(ctx context.Context, ec *runtimechain.Call) (*catalogv1.CallToolResponse, *runtimev1.ToolPlacement, error) {
	cc := runtimeident.CallContext(ec.Thread, ec.View.Base.Agent, ec.RunID, ec.CallID)
	ctx, pl := grpcx.WithPlacementKey(ctx, placementKey(ctx, ec.Tool(), ec.ThreadID()))
	var resp *catalogv1.CallToolResponse
	var trailer metadata.MD
	if ec.Notify == nil {
		r, err := s.catalog.CallTool(runtimeident.ActingFor(ctx), &catalogv1.CallToolRequest{Name: ec.Name, Arguments: ec.ArgsPB, CallContext: cc}, grpc.Trailer(&trailer))
		if err != nil {
			return nil, nil, err
		}
		resp = r
	} else {
		cctx, cancel := context.WithTimeout(runtimeident.ActingFor(ctx), s.cfg.ToolCallTimeout)
		defer cancel()
		stream, err := s.catalog.CallToolStream(cctx, &catalogv1.CallToolStreamRequest{Name: ec.Name, Arguments: ec.ArgsPB, CallContext: cc})
		if err != nil {
			return nil, nil, err
		}
		for resp == nil {
			m, err := stream.Recv()
			if err != nil {
				return nil, nil, err
			}
			if n := m.GetNotification(); n != nil {
				ec.Notify(n)
				continue
			}
			resp = m.GetResult()
		}
		if pl.Key != "" {
			// The result is the last message: the end of the stream (and
			// its trailer) follows at once.
			if _, err := stream.Recv(); errors.Is(err, io.EOF) {
				trailer = stream.Trailer()
			}
		}
	}
	return resp, s.placed.report(pl.Key, pl.Addr(), pl.Owner(), trailer, revealsAddresses(ctx)), nil
}
