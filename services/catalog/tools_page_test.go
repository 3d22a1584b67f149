package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// TestListToolsPagesWithAvailableFilter: a page token issued for a filter
// with `available` set is accepted for the next page of the same filter
// (the filter key once held a pointer address, so no token ever matched).
func TestListToolsPagesWithAvailableFilter(t *testing.T) {
	rows := ""
	for i := 0; i < 5; i++ {
		rows += fmt.Sprintf(`{"server": "s", "name": "tool_%d", "description": "tool number %d", "input_schema": {"type": "object"}}`+"\n", i, i)
	}
	p := filepath.Join(t.TempDir(), "tools.jsonl")
	if err := os.WriteFile(p, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, fmt.Sprintf(`{"mcpServers": {"static": {"type": "static", "path": %q}}}`, p), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	avail := true
	var names []string
	token := ""
	for page := 0; page < 10; page++ {
		var resp *catalogv1.ListToolsResponse
		var err error
		for try := 0; try < 50; try++ { // the static server loads asynchronously
			resp, err = h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{Available: &avail, PageSize: 2, PageToken: token})
			if err != nil || resp.GetTotalSize() > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, tl := range resp.GetTools() {
			names = append(names, tl.GetName())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(names) != 5 {
		t.Fatalf("paged through %d tools %v; want 5", len(names), names)
	}
}
