package runtimesqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// TestMessageColumnsFilledAtOpen: messages written before migration 003
// (create_ns and role unknown, -1) get both from their bodies at the next
// Open, so message retention sees their real age.
func TestMessageColumnsFilledAtOpen(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "runtime.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	th := &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t", CreateTime: timestamppb.New(now), UpdateTime: timestamppb.New(now)}, ReadMarks: map[string]string{}}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	var msgs []*runtimev1.Message
	for i := 0; i < 1200; i++ { // more than one fill batch
		role := runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT
		if i%2 == 0 {
			role = runtimev1.MessageRole_MESSAGE_ROLE_USER
		}
		msgs = append(msgs, &runtimev1.Message{Role: role, CreateTime: timestamppb.New(now.Add(time.Duration(i-1200) * time.Minute))})
	}
	if err := s.AppendMessages(ctx, "t", msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE messages SET create_ns = -1, role = -1`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if s, err = Open(p); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var unfilled int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE create_ns < 0 OR role < 0`).Scan(&unfilled); err != nil || unfilled != 0 {
		t.Fatalf("unfilled rows %d, %v", unfilled, err)
	}
	// Keep the last 100 minutes: message 1100 (a user message) opens the kept part.
	n, err := s.PurgeMessagesBefore(ctx, now.Add(-100*time.Minute))
	if err != nil || n != 1100 {
		t.Fatalf("PurgeMessagesBefore = %d, %v; want 1100", n, err)
	}
}
