package catalogmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/testkit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// npmServer returns the dist/index.js of an installed npm MCP server
// (scripts/install-npm.sh). Missing: fail under CI=true, skip otherwise.
func npmServer(t testing.TB, name string) string {
	t.Helper()
	return testkit.NPMServer(t, name)
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything with the given transport
// (sse | streamableHttp) and returns its base URL.
func startEverythingHTTP(t testing.TB, mode string) string {
	t.Helper()
	js := npmServer(t, "server-everything")
	port := freePort(t)
	cmd := exec.Command("node", js, mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return base
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server-everything %s did not listen", mode)
	return ""
}

func stdioServer(name, js string, args ...string) catalogconfig.Server {
	return catalogconfig.Server{Name: name, Command: "node", Args: append([]string{js}, args...)}
}

func textOf(t testing.TB, r *Result) string {
	t.Helper()
	var parts []string
	for _, c := range r.Content {
		var b struct{ Type, Text string }
		json.Unmarshal(c, &b)
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

func TestSessionAgainstNpmServers(t *testing.T) {
	ev := npmServer(t, "server-everything")
	fsJS := npmServer(t, "server-filesystem")
	mem := npmServer(t, "server-memory")
	seq := npmServer(t, "server-sequential-thinking")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from file"), 0o600)
	httpBase := startEverythingHTTP(t, "streamableHttp")
	sseBase := startEverythingHTTP(t, "sse")

	cases := []struct {
		cfg        catalogconfig.Server
		tool, args string
		want       string
	}{
		{stdioServer("everything", ev, "stdio"), "echo", `{"message":"hi"}`, "Echo: hi"},
		{stdioServer("fs", fsJS, dir), "read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "hello.txt")), "hello from file"},
		{catalogconfig.Server{Name: "memory", Command: "node", Args: []string{mem}, Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "m.jsonl")}},
			"create_entities", `{"entities":[{"name":"a","entityType":"t","observations":["o"]}]}`, `"name": "a"`},
		{stdioServer("seq", seq), "sequentialthinking", `{"thought":"x","nextThoughtNeeded":false,"thoughtNumber":1,"totalThoughts":1}`, "thoughtNumber"},
		{catalogconfig.Server{Name: "evhttp", URL: httpBase + "/mcp"}, "echo", `{"message":"over http"}`, "Echo: over http"},
		{catalogconfig.Server{Name: "evsse", Type: "sse", URL: sseBase + "/sse"}, "get-sum", `{"a":2,"b":3}`, "5"},
	}
	for _, c := range cases {
		t.Run(c.cfg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Connect(ctx, c.cfg, Options{CloseGrace: time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(time.Second)
			if s.ProtocolVersion == "" || s.ServerInfo.Name == "" {
				t.Fatalf("no negotiated version/server info: %q %+v", s.ProtocolVersion, s.ServerInfo)
			}
			tools, err := s.ListTools(ctx)
			if err != nil || len(tools) == 0 {
				t.Fatalf("list: %v %d", err, len(tools))
			}
			found := false
			for _, tl := range tools {
				if tl.Name == c.tool {
					found = true
					if tl.InputSchema == nil {
						t.Fatalf("tool %s has no raw input schema", tl.Name)
					}
				}
			}
			if !found {
				t.Fatalf("tool %s not listed", c.tool)
			}
			res, err := s.CallTool(ctx, c.tool, json.RawMessage(c.args), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || !strings.Contains(textOf(t, res), c.want) {
				t.Fatalf("result %v: %q", res.IsError, textOf(t, res))
			}
		})
	}
}

func TestRawSchemaKeepsKeywords(t *testing.T) {
	ev := npmServer(t, "server-everything")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Connect(ctx, stdioServer("everything", ev, "stdio"), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	tools, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// zod-to-json-schema emits $schema, which mcp-go's typed schema drops.
	found := false
	for _, tl := range tools {
		if tl.Name == "echo" {
			found = true
			if !strings.Contains(string(tl.InputSchema), `"$schema"`) {
				t.Fatalf("raw schema lost $schema: %s", tl.InputSchema)
			}
		}
	}
	if !found {
		t.Fatal("echo not listed")
	}
}
