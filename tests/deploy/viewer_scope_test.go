package deploy_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// checkExampleAnnotations compares every example tool's MCP annotation
// hints, as the catalog reports them from the real servers, with
// examples/tool-effects.csv (whose hints the viewer policy test decides
// over), and that the file labels exactly the tools the servers list.
func checkExampleAnnotations(t *testing.T, cat catalogv1.CatalogServiceClient, admin context.Context, root string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "examples", "tool-effects.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	hints := rows[0][2:6]
	want := map[string][]string{}
	for _, row := range rows[1:] {
		want[row[0]+"/"+row[1]] = row[2:6]
	}
	seen := 0
	for token := ""; ; {
		res, err := cat.ListTools(admin, &catalogv1.ListToolsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.GetTools() {
			key := tl.GetServer() + "/" + tl.GetOriginalName()
			w, ok := want[key]
			if !ok {
				t.Errorf("%s is not labelled in examples/tool-effects.csv", key)
				continue
			}
			seen++
			ann := tl.GetAnnotations().AsMap()
			for i, h := range hints {
				got := ""
				if b, ok := ann[h].(bool); ok {
					got = map[bool]string{true: "true", false: "false"}[b]
				}
				if got != w[i] {
					t.Errorf("%s %s: server reports %q, tool-effects.csv says %q", key, h, got, w[i])
				}
			}
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	if seen != len(want) {
		t.Errorf("the servers list %d labelled tools; tool-effects.csv labels %d", seen, len(want))
	}
}

// checkViewerScope: through the real suite as the demo viewer, no example
// server reads a file outside the demo folder (the filesystem server's root,
// the git server's GIT_BASE_DIR and GIT_CEILING_DIRECTORIES), and a
// state-changing tool is refused without running (no file written).
func checkViewerScope(t *testing.T, p *testkit.Process, root string) {
	t.Helper()
	rc := runtimev1.NewRuntimeServiceClient(p.Dial(t))
	viewer := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tp-demo-viewer")
	th, err := rc.CreateThread(viewer, &runtimev1.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := th.GetThread().GetThreadId()
	demo := filepath.Join(root, "examples", "demo-files")
	call := func(name string, args map[string]any) *runtimev1.ToolResult {
		t.Helper()
		st, err := structpb.NewStruct(args)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(viewer, 60*time.Second)
		defer cancel()
		res, err := rc.ExecuteToolCall(ctx, &runtimev1.ExecuteToolCallRequest{ThreadId: id, ToolCall: &runtimev1.ToolCall{Id: name, Name: name, Arguments: st}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.GetResult()
	}
	text := func(r *runtimev1.ToolResult) string {
		var b strings.Builder
		for _, c := range r.GetContent() {
			b.WriteString(c.GetText())
		}
		return b.String()
	}
	ok := runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS
	reads := []string{"filesystem_read_text_file", "filesystem_list_directory", "git_git_log", "git_git_show", "git_git_status", "filesystem_write_file"}
	if r := call("tool_search", map[string]any{"query": "select:" + strings.Join(reads, ",")}); len(r.GetPromoted().GetNames()) != len(reads)-1 {
		t.Fatalf("viewer promoted %v, want the five read tools (write_file is never visible)", r.GetPromoted().GetNames())
	}
	if r := call("filesystem_read_text_file", map[string]any{"path": filepath.Join(demo, "README.md")}); r.GetStatus() != ok {
		t.Fatalf("viewer reading the demo README: %v", r)
	}
	// The repository that holds demo-files has a go.mod; none of these may show it.
	outside := []struct {
		tool string
		args map[string]any
	}{
		{"filesystem_read_text_file", map[string]any{"path": filepath.Join(root, "go.mod")}},
		{"filesystem_read_text_file", map[string]any{"path": demo + "/../../go.mod"}},
		{"filesystem_read_text_file", map[string]any{"path": "/etc/passwd"}},
		{"filesystem_list_directory", map[string]any{"path": root}},
		{"git_git_log", map[string]any{"path": demo}},
		{"git_git_log", map[string]any{"path": root}},
		{"git_git_show", map[string]any{"path": demo, "object": "HEAD:go.mod"}},
		{"git_git_show", map[string]any{"path": demo, "object": "HEAD", "filePath": "../go.mod"}},
		{"git_git_status", map[string]any{"path": "/etc"}},
	}
	for _, c := range outside {
		r := call(c.tool, c.args)
		out := text(r)
		if r.GetStatus() == ok || strings.Contains(out, "module github.com/toolplane") || strings.Contains(out, "root:x:0") || strings.Contains(out, "go.sum") {
			t.Errorf("viewer %s %v read outside the demo folder: %s %.300s", c.tool, c.args, r.GetStatus(), out)
		} else {
			t.Logf("refused: %s %v: %.160s", c.tool, c.args, out)
		}
	}
	target := filepath.Join(demo, "viewer-wrote-this.txt")
	if r := call("filesystem_write_file", map[string]any{"path": target, "content": "x"}); r.GetStatus() == ok || !strings.HasPrefix(r.GetReasonCode(), "authz.") {
		t.Errorf("viewer write_file: %v (want an authz refusal)", r)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		os.Remove(target)
		t.Errorf("the viewer's refused write_file created %s", target)
	}
}
