package catalogacp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// Options bound a connection.
type Options struct {
	// InitTimeout bounds start-up: initialize and session/new (default 60 s,
	// like an MCP server's session_init_timeout).
	InitTimeout time.Duration
	// CancelGrace is how long a cancelled prompt may take to answer
	// stopReason "cancelled" before the process group is killed (default 5 s).
	CancelGrace time.Duration
	// CloseGrace is the stdin-EOF → SIGTERM → SIGKILL step (default 2 s).
	CloseGrace time.Duration
	// BaseEnv is the environment every child starts from (default
	// catalogmcp.DefaultBaseEnv); the agent's env is added to it.
	BaseEnv []string
	// MaxText bounds the final text kept from the agent's message chunks
	// (default 1 MiB); the rest is cut with a note.
	MaxText int
	// Log receives the connection's protocol log (nil: discarded).
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.InitTimeout <= 0 {
		o.InitTimeout = 60 * time.Second
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = 5 * time.Second
	}
	if o.CloseGrace <= 0 {
		o.CloseGrace = 2 * time.Second
	}
	if o.BaseEnv == nil {
		o.BaseEnv = catalogmcp.DefaultBaseEnv()
	}
	if o.MaxText <= 0 {
		o.MaxText = 1 << 20
	}
	return o
}

// UpdateKind classifies a streamed update.
type UpdateKind string

// Update kinds, relayed to the caller as progress.
const (
	UpdateMessage    UpdateKind = "message"     // agent_message_chunk text
	UpdateThought    UpdateKind = "thought"     // agent_thought_chunk text
	UpdateToolCall   UpdateKind = "tool_call"   // a tool call started (title, status)
	UpdateToolStatus UpdateKind = "tool_status" // a tool call changed status
	UpdatePlan       UpdateKind = "plan"        // the agent's plan entries
	UpdatePermission UpdateKind = "permission"  // a permission request and the answer given
)

// Update is one streamed update of a prompt turn.
type Update struct {
	Kind UpdateKind
	Text string
}

// Result is the end of a prompt turn.
type Result struct {
	// Text is the concatenation of the agent's message chunks.
	Text string
	// StopReason is ACP's (end_turn, max_tokens, refusal, cancelled, ...).
	StopReason string
	// Dir is the working directory the agent ran in.
	Dir string
}

// ErrExited reports that the agent process ended; the supervisor starts a
// new one for the next prompt.
var ErrExited = errors.New("ACP agent process exited")

// Conn is one running ACP agent with one session whose working directory
// is the thread's ACP workspace. Prompts on a Conn are serialized (ACP
// allows one prompt turn per session at a time).
type Conn struct {
	name    string
	agent   Agent
	dir     string
	opts    Options
	proc    *catalogmcp.Process
	conn    *acp.ClientSideConnection
	session acp.SessionId
	h       *handler

	turn   sync.Mutex  // one prompt at a time
	broken atomic.Bool // killed after an unanswered cancel
}

// Start runs the agent in dir, negotiates protocol version 1 (client
// capabilities fs and terminal off: the agent uses its own tools in its
// own folder) and opens a session there. agent must be resolved (Resolve).
func Start(ctx context.Context, name string, agent Agent, dir string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("ACP agent %s: working directory is not a folder", name)
	}
	env := append([]string(nil), opts.BaseEnv...)
	for k, v := range agent.Env {
		env = append(env, k+"="+v)
	}
	p, err := catalogmcp.StartProcess(catalogmcp.ProcessSpec{Command: agent.Command, Args: agent.Args, Env: env, Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("ACP agent %s: %w", name, err)
	}
	c := &Conn{name: name, agent: agent, dir: dir, opts: opts, proc: p, h: &handler{autoApprove: agent.AutoApprovePermissions}}
	in, out := p.Stdio()
	c.conn = acp.NewClientSideConnection(c.h, in, out)
	if opts.Log != nil {
		c.conn.SetLogger(opts.Log)
	} else {
		c.conn.SetLogger(slog.New(slog.DiscardHandler))
	}
	ictx, cancel := context.WithTimeout(ctx, opts.InitTimeout)
	defer cancel()
	if err := c.init(ictx); err != nil {
		_ = p.Close(opts.CloseGrace)
		return nil, err
	}
	return c, nil
}

func (c *Conn) init(ctx context.Context) error {
	var ir acp.InitializeResponse
	err := c.await(ctx, func(ctx context.Context) error {
		var err error
		ir, err = c.conn.Initialize(ctx, acp.InitializeRequest{
			ProtocolVersion:    acp.ProtocolVersionNumber,
			ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: false, WriteTextFile: false}, Terminal: false},
			ClientInfo:         &acp.Implementation{Name: "toolplane", Version: "1"},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("ACP agent %s: initialize: %w", c.name, err)
	}
	if ir.ProtocolVersion != acp.ProtocolVersionNumber {
		return fmt.Errorf("ACP agent %s: initialize: the agent speaks protocol version %d, Toolplane speaks %d", c.name, ir.ProtocolVersion, acp.ProtocolVersionNumber)
	}
	req := acp.NewSessionRequest{Cwd: c.dir, McpServers: []acp.McpServer{}}
	if c.agent.Model != "" {
		req.Meta = map[string]any{"model": c.agent.Model}
	}
	var sr acp.NewSessionResponse
	err = c.await(ctx, func(ctx context.Context) error {
		var err error
		sr, err = c.conn.NewSession(ctx, req)
		return err
	})
	if err != nil {
		return fmt.Errorf("ACP agent %s: session/new: %w", c.name, err)
	}
	c.session = sr.SessionId
	return nil
}

// await runs f, failing fast when the process exits first.
func (c *Conn) await(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-c.proc.Done():
		cancel()
		return fmt.Errorf("%w: %v", ErrExited, c.proc.ExitError())
	}
}

// Dir is the working directory the agent runs in.
func (c *Conn) Dir() string { return c.dir }

// Alive reports whether the process still runs and can take a prompt.
func (c *Conn) Alive() bool {
	if c.broken.Load() {
		return false
	}
	select {
	case <-c.proc.Done():
		return false
	default:
		return true
	}
}

// Close ends the process (stdin EOF, then SIGTERM, then SIGKILL to its group).
func (c *Conn) Close() error { return c.proc.Close(c.opts.CloseGrace) }

// Prompt sends one prompt turn and relays its updates to onUpdate (called
// from one goroutine, in order). When ctx ends first, session/cancel is
// sent and the turn's "cancelled" answer awaited for CancelGrace; an agent
// that does not answer is killed (the next prompt needs a new Conn).
func (c *Conn) Prompt(ctx context.Context, text string, onUpdate func(Update)) (Result, error) {
	c.turn.Lock()
	defer c.turn.Unlock()
	if !c.Alive() {
		return Result{}, fmt.Errorf("%w: %v", ErrExited, c.proc.ExitError())
	}
	col := &collector{max: c.opts.MaxText, onUpdate: onUpdate}
	c.h.begin(c.session, col)
	defer c.h.end()

	// The request runs on its own context: cancellation is ACP's
	// session/cancel, after which the agent still answers the prompt.
	pctx, stop := context.WithCancel(context.Background())
	defer stop()
	type out struct {
		resp acp.PromptResponse
		err  error
	}
	done := make(chan out, 1)
	go func() {
		r, err := c.conn.Prompt(pctx, acp.PromptRequest{SessionId: c.session, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		done <- out{r, err}
	}()
	finish := func(o out) (Result, error) {
		// The SDK delivers notifications sent before the response before
		// the response itself, so every chunk of the turn is in col.
		if o.err != nil {
			// A closed connection means the process is exiting: report how
			// it ended once its exit is seen (bounded wait). An error the
			// agent answered is returned at once.
			select {
			case <-c.conn.Done():
				select {
				case <-c.proc.Done():
					return Result{}, fmt.Errorf("%w: %v", ErrExited, c.proc.ExitError())
				case <-time.After(time.Second):
				}
			default:
			}
			return Result{}, fmt.Errorf("ACP agent %s: session/prompt: %w", c.name, o.err)
		}
		return Result{Text: col.text(), StopReason: string(o.resp.StopReason), Dir: c.dir}, nil
	}
	select {
	case o := <-done:
		return finish(o)
	case <-c.proc.Done():
		return Result{}, fmt.Errorf("%w: %v", ErrExited, c.proc.ExitError())
	case <-ctx.Done():
	}
	_ = c.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: c.session})
	select {
	case o := <-done:
		r, err := finish(o)
		if err == nil {
			err = ctx.Err()
		}
		return r, err
	case <-c.proc.Done():
	case <-time.After(c.opts.CancelGrace):
		c.broken.Store(true)
		_ = c.proc.Close(0)
	}
	return Result{Text: col.text(), StopReason: string(acp.StopReasonCancelled), Dir: c.dir}, ctx.Err()
}

// collector gathers one turn's updates.
type collector struct {
	mu       sync.Mutex
	max      int
	sb       strings.Builder
	cut      bool
	onUpdate func(Update)
}

func (c *collector) add(u Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.Kind == UpdateMessage {
		if room := c.max - c.sb.Len(); room < len(u.Text) {
			if room > 0 {
				c.sb.WriteString(u.Text[:room])
			}
			c.cut = true
		} else {
			c.sb.WriteString(u.Text)
		}
	}
	if c.onUpdate != nil {
		c.onUpdate(u)
	}
}

func (c *collector) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return c.sb.String() + fmt.Sprintf("\n[... the agent's answer was cut at %d bytes]", c.max)
	}
	return c.sb.String()
}
