package catalog

import (
	"testing"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// working_dir round-trips through the API's ServerConfig (an API write
// must not drop it).
func TestWorkingDirRoundTrip(t *testing.T) {
	s := catalogconfig.Server{Name: "fs", Command: "node", SessionScope: catalogconfig.ScopePerThread, WorkingDir: catalogconfig.WorkingDirThread}
	c := configProto(s)
	if c.GetWorkingDir() != "thread" {
		t.Fatalf("ServerConfig.working_dir = %q", c.GetWorkingDir())
	}
	back, err := configFromProto(c, nil)
	if err != nil || back.WorkingDir != catalogconfig.WorkingDirThread {
		t.Fatalf("configFromProto: %+v, %v", back, err)
	}
}
