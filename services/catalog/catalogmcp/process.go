package catalogmcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a supervised stdio child. It runs in its own process group
// (Setpgid) so Close and exit clean-up reach grandchildren (npx → node), and
// with Pdeathsig SIGKILL so the direct child dies if the catalog is killed;
// grandchildren then see EOF on the stdin pipe they inherited (every MCP
// stdio server exits on stdin EOF) and, once the child has exited, are also
// sent SIGKILL through the group.
//
// Stdio pipes are plain os.Pipe pairs (not exec's copying goroutines), so
// Wait returns the moment the direct child exits even when a grandchild still
// holds a pipe open: exit is detected at once.
type Process struct {
	cmd    *exec.Cmd
	pgid   int
	stdin  *os.File // our write end
	stdout *os.File // our read end
	stderr *ring

	done    chan struct{}
	waitErr error
	exitAt  time.Time
	once    sync.Once
}

// ProcessSpec describes a child to start.
type ProcessSpec struct {
	// Command and Args; Command is resolved through PATH.
	Command string
	Args    []string
	// Env is the complete environment of the child ("K=V").
	Env []string
	// Dir is the working directory ("" = the catalog's).
	Dir string
}

// spawner runs every fork on one goroutine locked to its OS thread for the
// life of the process: Pdeathsig fires when the *thread* that forked the
// child exits, and a locked goroutine that never returns keeps its thread.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { f(); close(done) }
	<-done
}

// StartProcess starts the child. The returned Process must be closed.
func StartProcess(spec ProcessSpec) (*Process, error) {
	path, err := exec.LookPath(spec.Command)
	if err != nil {
		return nil, fmt.Errorf("command %q: %w", spec.Command, err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	onSpawnThread(func() { err = cmd.Start() })
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %q: %w", spec.Command, err)
	}
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, stdin: inW, stdout: outR, stderr: newRing(8 << 10), done: make(chan struct{})}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 4096)
		for {
			n, err := errR.Read(buf)
			p.stderr.Write(buf[:n])
			if err != nil {
				errR.Close()
				return
			}
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		p.exitAt = time.Now()
		// The direct child is gone: nothing of its group may outlive it.
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		// Let the last stderr lines in before reporting the exit (bounded:
		// a process outside the group could still hold the pipe).
		select {
		case <-drained:
		case <-time.After(200 * time.Millisecond):
		}
		close(p.done)
	}()
	return p, nil
}

// Pid returns the child's pid (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the direct child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError describes how the child ended, with the tail of its stderr; nil
// while it runs.
func (p *Process) ExitError() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	status := "exited"
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
		status = "exited with status 0"
	case errors.As(p.waitErr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = "killed by signal " + ws.Signal().String()
		} else {
			status = fmt.Sprintf("exited with status %d", ee.ExitCode())
		}
	default:
		status = p.waitErr.Error()
	}
	if tail := strings.TrimSpace(p.StderrTail(2048)); tail != "" {
		return fmt.Errorf("process %s; stderr: %s", status, tail)
	}
	return fmt.Errorf("process %s", status)
}

// StderrTail returns up to n trailing bytes of the child's stderr.
func (p *Process) StderrTail(n int) string { return p.stderr.Tail(n) }

// Stdio returns the write end of the child's stdin and the read end of its
// stdout, for protocols other than MCP spoken over the same pipes (ACP,
// services/catalog/catalogacp).
func (p *Process) Stdio() (stdin io.Writer, stdout io.Reader) { return p.stdin, p.stdout }

// Close stops the child without ever hanging: close stdin and wait up to
// grace, then SIGTERM the group and wait up to grace, then SIGKILL the group
// and wait up to grace once more. It returns an error only if the child
// survived SIGKILL (which the kernel does not allow short of an
// uninterruptible sleep).
func (p *Process) Close(grace time.Duration) error {
	var err error
	p.once.Do(func() {
		p.stdin.Close()
		defer p.stdout.Close()
		wait := func() bool {
			select {
			case <-p.done:
				return true
			case <-time.After(grace):
				return false
			}
		}
		if wait() {
			return
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
		if wait() {
			return
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		if !wait() {
			err = fmt.Errorf("process %d did not exit after SIGKILL", p.Pid())
		}
	})
	return err
}

// ring is a bounded, drop-oldest byte buffer.
type ring struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func newRing(max int) *ring { return &ring{max: max} }

func (r *ring) Write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, b...)
	if len(r.buf) > r.max {
		r.buf = append(r.buf[:0:0], r.buf[len(r.buf)-r.max:]...)
	}
}

func (r *ring) Tail(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buf
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
