package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/services/runtime"
)

// view_image is bound only when a configured model supports vision, and
// through ExecuteToolCall it reads the thread's image and records it.
func TestViewImageBoundForVisionModels(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\xdac\xfc\xcf\xc0\xf0\x1f\x00\x05\x05\x02\x00_\xc8\xf1\xd2\x00\x00\x00\x00IEND\xaeB`\x82")
	for _, vision := range []bool{false, true} {
		dir := t.TempDir()
		s := newSuiteWith(t, dir, map[string]any{"mcpServers": map[string]any{}}, false, func(c *app.Config) {
			c.Runtime.Loop.Models = []runtime.ModelConfig{{Name: "m", BaseURL: "http://127.0.0.1:9/v1", SupportsVision: vision}}
		})
		alice := s.rt(aliceToken)
		th := newThread(t, alice, nil)
		if got := names(assemble(t, alice, th, "look").GetTools())["view_image"]; got != vision {
			t.Fatalf("supports_vision %v: view_image bound = %v", vision, got)
		}
		if !vision {
			continue
		}
		up := filepath.Join(dir, "data", "runtime", "threads", th, "user-data", "uploads")
		if err := os.MkdirAll(up, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(up, "dot.png"), png, 0o600); err != nil {
			t.Fatal(err)
		}
		res := call(t, alice, th, "view_image", map[string]any{"image_path": "/mnt/user-data/uploads/dot.png"})
		if res.GetStatus() != runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS || !strings.Contains(text(res), "image/png") {
			t.Fatalf("view_image = %v", res)
		}
		recs, _ := os.ReadDir(filepath.Join(dir, "data", "runtime", "threads", th, "viewed-images"))
		if len(recs) != 1 {
			t.Fatalf("%d viewed-image records, want 1", len(recs))
		}
	}
}
