package catalogacp

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtureAgent is the fixture ACP agent (testdata/agent/agent.mjs, written
// with the official TypeScript SDK pinned in its package.json and installed
// by scripts/install-acp-fixture.sh). Missing: fails under CI=true, skips
// elsewhere.
func fixtureAgent(t *testing.T) Agent {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "agent", "agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	_, serr := os.Stat(filepath.Join("testdata", "agent", "node_modules", "@agentclientprotocol", "sdk", "package.json"))
	_, nerr := exec.LookPath("node")
	if err := errors.Join(serr, nerr); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
		}
		t.Skipf("fixture ACP agent not installed (run scripts/install-acp-fixture.sh): %v", err)
	}
	return Agent{Command: "node", Args: []string{script}, Description: "the fixture agent"}
}

// threads makes <tmp>/threads/<id> folders as the runtime does.
func threads(t *testing.T, ids ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "threads")
	for _, id := range ids {
		if err := os.MkdirAll(filepath.Join(dir, id, "user-data", "workspace"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// recorder collects the updates of one turn.
type recorder struct {
	mu sync.Mutex
	us []Update
	ch chan Update
}

func newRecorder() *recorder { return &recorder{ch: make(chan Update, 64)} }

func (r *recorder) add(u Update) {
	r.mu.Lock()
	r.us = append(r.us, u)
	r.mu.Unlock()
	select {
	case r.ch <- u:
	default:
	}
}

func (r *recorder) has(kind UpdateKind, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.us, Update{Kind: kind, Text: text})
}

func newTestPool(t *testing.T, agents map[string]Agent, dir string, opts Options) *Pool {
	t.Helper()
	p := NewPool(PoolConfig{Agents: agents, ThreadsDir: dir, Options: opts})
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPromptStreamsUpdatesAndReturnsTheText(t *testing.T) {
	dir := threads(t, "th-1")
	p := newTestPool(t, map[string]Agent{"fixture": fixtureAgent(t)}, dir, Options{})
	rec := newRecorder()
	res, err := p.Invoke(ctxT(t), "fixture", "th-1", "echo hello world", rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "you said: hello world" || res.StopReason != "end_turn" {
		t.Fatalf("result %+v", res)
	}
	want := filepath.Join(dir, "th-1", ACPWorkspaceDir)
	if res.Dir != want {
		t.Fatalf("dir %q, want %q", res.Dir, want)
	}
	b, err := os.ReadFile(filepath.Join(want, "answer.txt"))
	if err != nil || string(b) != "hello world" {
		t.Fatalf("the agent did not work in the thread's ACP workspace: %q, %v", b, err)
	}
	for _, u := range []Update{
		{UpdateThought, "thinking"},
		{UpdateToolCall, "write answer.txt (in_progress)"},
		{UpdateToolStatus, "t1: completed"},
		{UpdateMessage, "you said: "},
		{UpdateMessage, "hello world"},
	} {
		if !rec.has(u.Kind, u.Text) {
			t.Errorf("update %+v not relayed; got %+v", u, rec.us)
		}
	}
	// The second turn reuses the process and the session.
	if _, err := p.Invoke(ctxT(t), "fixture", "th-1", "echo again", nil); err != nil || p.Live() != 1 {
		t.Fatalf("second turn: %v, live %d", err, p.Live())
	}
}

func TestPermissionRequestsDeniedByDefault(t *testing.T) {
	dir := threads(t, "th-1")
	a := fixtureAgent(t)
	approving := a
	approving.AutoApprovePermissions = true
	p := newTestPool(t, map[string]Agent{"deny": a, "allow": approving}, dir, Options{})

	rec := newRecorder()
	res, err := p.Invoke(ctxT(t), "deny", "th-1", "permission", rec.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "permission: no" || !rec.has(UpdatePermission, "rm -rf /: reject_once (no)") {
		t.Fatalf("default answer: %q, updates %+v", res.Text, rec.us)
	}
	res, err = p.Invoke(ctxT(t), "allow", "th-1", "permission", nil)
	if err != nil || res.Text != "permission: once" {
		t.Fatalf("auto_approve_permissions: %q, %v (allow_always must never be chosen)", res.Text, err)
	}
}

func TestCancellationEndsThePrompt(t *testing.T) {
	dir := threads(t, "th-1")
	p := newTestPool(t, map[string]Agent{"fixture": fixtureAgent(t)}, dir, Options{CancelGrace: 5 * time.Second})
	ctx, cancel := context.WithCancel(ctxT(t))
	rec := newRecorder()
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := p.Invoke(ctx, "fixture", "th-1", "wait", rec.add)
		done <- out{r, err}
	}()
	select {
	case <-rec.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no update from the waiting agent")
	}
	start := time.Now()
	cancel()
	o := <-done
	if !errors.Is(o.err, context.Canceled) || o.res.StopReason != "cancelled" || o.res.Text != "started" {
		t.Fatalf("cancelled turn: %+v, %v", o.res, o.err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the agent's cancelled answer took %v", d)
	}
	// The agent answered session/cancel, so its process and session live on.
	res, err := p.Invoke(ctxT(t), "fixture", "th-1", "echo after", nil)
	if err != nil || res.Text != "you said: after" || p.Live() != 1 {
		t.Fatalf("after cancel: %+v, %v, live %d", res, err, p.Live())
	}
}

func TestAnAgentIgnoringCancelIsKilledAndRestarted(t *testing.T) {
	dir := threads(t, "th-1")
	p := newTestPool(t, map[string]Agent{"fixture": fixtureAgent(t)}, dir, Options{CancelGrace: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(ctxT(t))
	rec := newRecorder()
	go func() { <-rec.ch; cancel() }()
	res, err := p.Invoke(ctx, "fixture", "th-1", "hang", rec.add)
	if !errors.Is(err, context.Canceled) || res.StopReason != "cancelled" {
		t.Fatalf("hung turn: %+v, %v", res, err)
	}
	res, err = p.Invoke(ctxT(t), "fixture", "th-1", "echo back", nil)
	if err != nil || res.Text != "you said: back" {
		t.Fatalf("no restart after the kill: %+v, %v", res, err)
	}
}

func TestCrashIsReportedAndTheNextCallRestarts(t *testing.T) {
	dir := threads(t, "th-1")
	p := newTestPool(t, map[string]Agent{"fixture": fixtureAgent(t)}, dir, Options{})
	_, err := p.Invoke(ctxT(t), "fixture", "th-1", "crash", nil)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("crash: %v", err)
	}
	res, err := p.Invoke(ctxT(t), "fixture", "th-1", "echo alive", nil)
	if err != nil || res.Text != "you said: alive" {
		t.Fatalf("restart: %+v, %v", res, err)
	}
}

func TestEnvFromTheHostAndModelHint(t *testing.T) {
	dir := threads(t, "th-1")
	a := fixtureAgent(t)
	a.Env = map[string]string{"FIXTURE_TOKEN": "${ACP_TEST_TOKEN}"}
	a.Model = "small-model"
	t.Setenv("ACP_TEST_TOKEN", "s3cret")
	r, err := a.Resolve("catalog.acp_agents.fixture", os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, map[string]Agent{"fixture": r}, dir, Options{})
	res, err := p.Invoke(ctxT(t), "fixture", "th-1", "env", nil)
	want := "token=s3cret cwd=" + filepath.Join(dir, "th-1", ACPWorkspaceDir) + " model=small-model"
	if err != nil || res.Text != want {
		t.Fatalf("env: %q, %v; want %q", res.Text, err, want)
	}
	a.Env = map[string]string{"FIXTURE_TOKEN": "$ACP_TEST_UNSET_VAR"}
	if _, err := a.Resolve("catalog.acp_agents.fixture", os.LookupEnv); err == nil || !strings.Contains(err.Error(), "catalog.acp_agents.fixture.env.FIXTURE_TOKEN") {
		t.Fatalf("missing variable: %v", err)
	}
}

func TestThreadsNeverShareAWorkspace(t *testing.T) {
	dir := threads(t, "th-a", "th-b")
	p := newTestPool(t, map[string]Agent{"fixture": fixtureAgent(t)}, dir, Options{})
	p.cfg.MaxLive = 1
	for _, th := range []string{"th-a", "th-b"} {
		if _, err := p.Invoke(ctxT(t), "fixture", th, "echo from "+th, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, th := range []string{"th-a", "th-b"} {
		b, err := os.ReadFile(filepath.Join(dir, th, ACPWorkspaceDir, "answer.txt"))
		if err != nil || string(b) != "from "+th {
			t.Fatalf("%s: %q, %v", th, b, err)
		}
	}
	if p.Live() != 1 {
		t.Fatalf("live %d with max 1: the idle process of th-a was not closed", p.Live())
	}
}

func TestThreadACPDirFailsClosed(t *testing.T) {
	dir := threads(t, "th-1")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "th-2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "th-2", ACPWorkspaceDir)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../th-1", "th-1/..", ".", "missing", "linked", "th-2"} {
		if got, err := ThreadACPDir(dir, id); err == nil {
			t.Errorf("ThreadACPDir(%q) = %q, accepted", id, got)
		}
	}
	if _, err := ThreadACPDir(filepath.Join(dir, "nope"), "th-1"); !errors.Is(err, ErrNoThreadWorkspace) {
		t.Errorf("a catalog without the runtime's volume: %v", err)
	}
	got, err := ThreadACPDir(dir, "th-1")
	if err != nil || got != filepath.Join(dir, "th-1", ACPWorkspaceDir) {
		t.Fatalf("ThreadACPDir = %q, %v", got, err)
	}
	if st, err := os.Stat(got); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	p := NewPool(PoolConfig{Agents: map[string]Agent{"a": {Command: "true", Description: "x"}}, ThreadsDir: dir})
	if _, err := p.Invoke(context.Background(), "b", "th-1", "x", nil); !errors.Is(err, ErrUnknownAgent) {
		t.Fatalf("unknown agent: %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := Agent{Command: "npx", Description: "d"}
	for _, c := range []struct {
		agents map[string]Agent
		want   string
	}{
		{map[string]Agent{"a": {Description: "d"}}, "catalog.acp_agents.a.command: required"},
		{map[string]Agent{"a": {Command: "x"}}, "catalog.acp_agents.a.description: required"},
		{map[string]Agent{"a": {Command: "x", Description: strings.Repeat("d", 1001)}}, "catalog.acp_agents.a.description"},
		{map[string]Agent{"a": {Command: "x", Description: "d", Env: map[string]string{"1X": "v"}}}, "catalog.acp_agents.a.env.1X"},
		{map[string]Agent{"a": {Command: "x", Description: "d", Args: []string{"ok", "b\x00"}}}, "catalog.acp_agents.a.args[1]"},
		{map[string]Agent{"a": {Command: "x", Description: "d", Model: "m\nx"}}, "catalog.acp_agents.a.model"},
		{map[string]Agent{"Bad Name": ok}, "catalog.acp_agents.Bad Name: the agent name"},
	} {
		err := ValidateAgents("catalog.acp_agents", c.agents)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateAgents(%v) = %v, want %q", c.agents, err, c.want)
		}
	}
	if err := ValidateAgents("catalog.acp_agents", map[string]Agent{"coder": ok}); err != nil {
		t.Fatal(err)
	}
}
