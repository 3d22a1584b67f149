package runtimechain

import (
	"context"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// ReadBeforeWrite refuses write_file and str_replace on an existing file
// whose current version the thread has not read (docs/deerflow.md §6.2);
// a file that does not exist yet may be written. The check and the write
// are serialised per (thread, path): the lock is held while the inner
// steps run.
type ReadBeforeWrite struct{ Workspace Workspace }

// Name implements Step.
func (ReadBeforeWrite) Name() string { return "read_before_write" }

// Description implements Step.
func (ReadBeforeWrite) Description() string {
	return "writes to an existing file need a read of its current version; check and write serialised per (thread, path)"
}

// Run implements Step.
func (s ReadBeforeWrite) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	t := c.Tool()
	if t == nil || t.Source != runtimeassembly.SourceConfig || (t.Use != "file.write" && t.Use != "file.str_replace") {
		return next(ctx, c)
	}
	p, _ := c.Args["path"].(string)
	clean, ok := s.Workspace.WritablePath(p)
	if !ok {
		return next(ctx, c) // the tool reports the bad path
	}
	unlock, err := s.Workspace.Lock(ctx, c.ThreadID()+"\x00"+clean)
	if err != nil {
		return &Outcome{Kind: runtimev1.ErrorKind_ERROR_KIND_RUNTIME, Reason: "read_before_write.lock",
			Text: "Error: " + c.Name + " not run: the write lock of " + clean + " could not be taken (the runtime's store did not answer); retry."}, nil
	}
	defer unlock()
	cur, err := s.Workspace.CurrentDigest(c.ThreadID(), clean)
	if err == nil && cur != "" && c.Thread.ReadMarks[clean] != cur {
		return PolicyErr("read_before_write.unread", "Error: %s blocked: %s exists and its current version has not been read. Call read_file on %s first (a line range is enough), then retry.", c.Name, clean, clean), nil
	}
	return next(ctx, c)
}
