package catalog

import (
	"fmt"
	"os"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// TestReadyMeansPublished: while servers are added by a reload, whenever
// GetServer reports a server READY its tools are already served (GetTool
// finds them). Before publishedStatuses, READY came from the live session
// state, a few ms before the rebuild that publishes its tools.
func TestReadyMeansPublished(t *testing.T) {
	h := start(t, extJSON(fixtureServer("base", "")), nil)
	ctx := ctxT(t)
	servers := []string{fixtureServer("base", "")}
	for round := 0; round < 4; round++ {
		name := fmt.Sprintf("late%d", round)
		servers = append(servers, fixtureServer(name, ""))
		if err := os.WriteFile(h.path, []byte(extJSON(servers...)), 0o600); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("%s never READY", name)
			}
			r, err := h.svc.ListServers(ctx, &catalogv1.ListServersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ready := false
			for _, s := range r.GetServers() {
				if s.GetConfig().GetName() == name && s.GetState() == catalogv1.ServerState_SERVER_STATE_READY {
					ready = true
				}
			}
			if ready {
				if _, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: name + "_echo"}); err != nil {
					t.Fatalf("round %d: %s is READY in ListServers but GetTool %s_echo: %v", round, name, name, err)
				}
				break
			}
		}
	}
}
