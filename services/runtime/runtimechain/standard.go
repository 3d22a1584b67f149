package runtimechain

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Authorizer decides whether a call may run (authz Authorize).
type Authorizer interface {
	Authorize(ctx context.Context, in *authzv1.AuthorizeRequest, opts ...grpc.CallOption) (*authzv1.AuthorizeResponse, error)
}

// Views builds the thread's tool view for a call (the assembly pipeline of
// docs/architecture.md §3.1; implemented by runtimeassembly.Builder).
type Views interface {
	Build(ctx context.Context, th *runtimestore.Thread) (*runtimeassembly.Base, error)
	View(ctx context.Context, th *runtimestore.Thread, b *runtimeassembly.Base) *runtimeassembly.View
}

// Workspace is the thread file system as the read-before-write gate needs
// it (implemented by runtimetools.Workspace).
type Workspace interface {
	// WritablePath returns the cleaned virtual path when p is writable.
	WritablePath(p string) (string, bool)
	// Lock serialises work on key — across every runtime replica when the
	// store is shared — until the returned func is called; waiting is
	// bounded by ctx.
	Lock(ctx context.Context, key string) (unlock func(), err error)
	// CurrentDigest returns the SHA-256 of a file, "" when it does not exist.
	CurrentDigest(threadID, clean string) (string, error)
}

// ResultSaver stores a text as a thread artifact (the output budget).
type ResultSaver interface {
	SaveResult(threadID, callID, prefix, ext, text string) (*runtimev1.Artifact, error)
}

// ToolCaller runs the call's tool: a built-in, a config tool or an MCP
// tool through catalog CallTool (implemented by runtimetools.Dispatcher).
type ToolCaller interface {
	CallTool(ctx context.Context, c *Call) (*Outcome, error)
}

// Deps are the narrow dependencies of the standard chain.
type Deps struct {
	Views      Views
	Authorizer Authorizer
	Workspace  Workspace
	Results    ResultSaver
	Tools      ToolCaller
	// Budget is runtime.tool_output.
	Budget BudgetSettings
	// Arguments is runtime.limits.tool_arguments.
	Arguments ArgumentLimits
	// Refusals records the runtime's own refusals (authz RecordRefusal);
	// nil: logged only.
	Refusals RefusalRecorder
	// Log receives the refusal log lines (nil: none).
	Log *slog.Logger
}

// Standard is the chain in force, outer → inner (docs/architecture.md
// §3.2). To add a step, write its type in a file of this package and add
// one line here (docs/decisions/0010-tool-call-chain.md). The order is
// pinned by TestStandardOrder and printed by `toolplane debug chain`.
func Standard(d Deps) *Chain {
	c, err := New(
		OutputBudget{Saver: d.Results, Settings: d.Budget},
		RefusalAudit{Recorder: d.Refusals, Log: d.Log},
		ResultSanitisation{},
		Assembly{Views: d.Views},
		InputBudget{Limits: d.Arguments},
		DecodeArguments{},
		MapArguments{Validate: d.Arguments.ValidateSchema},
		Authorization{Authz: d.Authorizer},
		ReadBeforeWrite{Workspace: d.Workspace},
		ErrorNormalisation{},
		ToolLookup{},
		SkillPolicy{},
		DeferredFilter{},
		Dispatch{Tools: d.Tools},
	)
	if err != nil {
		panic(err) // a programming error in the list above, caught by the tests
	}
	return c
}
