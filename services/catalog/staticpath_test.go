package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"github.com/toolplane/toolplane/internal/svckit"
)

// TestStaticPathConfined: a static server written through the API reads
// only from catalog.static_dirs (default: extensions_config's directory):
// traversal, absolute paths, symlinks out, variables and the data dir are
// refused naming the field, and nothing is listed from them.
func TestStaticPathConfined(t *testing.T) {
	conf, data, outside := t.TempDir(), t.TempDir(), t.TempDir()
	row := `{"name":"leak","description":"LEAKED-CONTENT"}` + "\n"
	for _, p := range []string{filepath.Join(conf, "ok.jsonl"), filepath.Join(outside, "secret.jsonl"), filepath.Join(data, "db.jsonl")} {
		if err := os.WriteFile(p, []byte(row), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret.jsonl"), filepath.Join(conf, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(conf, "dirlink")); err != nil {
		t.Fatal(err)
	}
	h := startDir(t, conf, `{"mcpServers": {}}`, func(_ *Config, e *svckit.Env) { e.DataDir = data })
	put := func(path string) error {
		_, err := h.admin.ReplaceServers(ctxT(t), &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
			{Name: "st", Type: catalogv1.ServerType_SERVER_TYPE_STATIC, Path: path}}})
		return err
	}
	for name, p := range map[string]string{
		"traversal":        filepath.Join(conf, "..", filepath.Base(outside), "secret.jsonl"),
		"absolute outside": filepath.Join(outside, "secret.jsonl"),
		"/etc/passwd":      "/etc/passwd",
		"missing outside":  "/nonexistent/x.jsonl",
		"file symlink out": filepath.Join(conf, "link.jsonl"),
		"dir symlink out":  filepath.Join(conf, "dirlink", "secret.jsonl"),
		"variable":         "${HOME}/x.jsonl",
		"data dir":         filepath.Join(data, "db.jsonl"),
	} {
		err := put(p)
		if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "mcpServers.st.path") || strings.Contains(err.Error(), "LEAKED") {
			t.Errorf("%s (%s): %v", name, p, err)
		}
		if _, err := h.svc.GetServer(ctxT(t), &catalogv1.GetServerRequest{Name: "st"}); codeOf(err) != codes.NotFound {
			t.Fatalf("%s: refused server was stored: %v", name, err)
		}
	}
	if err := put(filepath.Join(conf, "ok.jsonl")); err != nil {
		t.Fatalf("inside static_dirs: %v", err)
	}
	eventually(t, 5e9, "st READY", func() bool {
		s := h.server("st")
		return s != nil && s.GetState() == catalogv1.ServerState_SERVER_STATE_READY
	})
	// Listing a data-dir folder on purpose allows it.
	h2 := startDir(t, t.TempDir(), `{"mcpServers": {}}`, func(c *Config, e *svckit.Env) { e.DataDir = data; c.StaticDirs = []string{data} })
	if _, err := h2.admin.ReplaceServers(ctxT(t), &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{
		{Name: "st", Type: catalogv1.ServerType_SERVER_TYPE_STATIC, Path: filepath.Join(data, "db.jsonl")}}}); err != nil {
		t.Fatalf("data dir listed in static_dirs: %v", err)
	}
}
