package catalog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/internal/svckit"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
	"github.com/toolplane/toolplane/services/catalog/catalognames"
)

// TestNpmServers lists and calls the real npm servers: all four over stdio,
// server-everything also over streamable HTTP and SSE; `${VAR}` inside a
// string reaches the child.
func TestNpmServers(t *testing.T) {
	ev := npmJS(t, "server-everything")
	fsJS := npmJS(t, "server-filesystem")
	mem := npmJS(t, "server-memory")
	seq := npmJS(t, "server-sequential-thinking")
	dir := t.TempDir()
	os.WriteFile(dir+"/hello.txt", []byte("hello from file"), 0o600)
	httpBase := startEverything(t, ev, "streamableHttp")
	sseBase := startEverything(t, ev, "sse")
	t.Setenv("TP_TEST_NAME", "world")
	ext := fmt.Sprintf(`{"mcpServers": {
		"everything": {"command": "node", "args": [%q, "stdio"], "env": {"GREETING": "${TP_TEST_NAME}!"}},
		"fs": {"command": "node", "args": [%q, %q]},
		"memory": {"command": "node", "args": [%q], "env": {"MEMORY_FILE_PATH": "%s/mem.jsonl"}},
		"seq": {"command": "node", "args": [%q]},
		"evhttp": {"type": "http", "url": "%s/mcp"},
		"evsse": {"transport": "sse", "url": "%s/sse"}
	}}`, ev, fsJS, dir, mem, dir, seq, httpBase, sseBase)
	h := start(t, ext, nil)
	ctx := ctxT(t)
	ls, err := h.svc.ListServers(ctx, &catalogv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range ls.Servers {
		order = append(order, s.Config.Name)
		if s.State != catalogv1.ServerState_SERVER_STATE_READY || s.ProtocolVersion == "" || s.ServerName == "" || s.ToolCount == 0 {
			t.Errorf("%s: %v %q %q tools=%d err=%s", s.Config.Name, s.State, s.ProtocolVersion, s.ServerName, s.ToolCount, s.LastError)
		}
	}
	if strings.Join(order, ",") != "everything,fs,memory,seq,evhttp,evsse" {
		t.Fatalf("config order lost: %v", order)
	}
	for _, c := range []struct{ tool, args, want string }{
		{"everything_echo", `{"message":"stdio"}`, "Echo: stdio"},
		{"evhttp_echo", `{"message":"http"}`, "Echo: http"},
		{"evsse_echo", `{"message":"sse"}`, "Echo: sse"},
		{"everything_get-env", `{}`, `"GREETING": "world!"`},
		{"fs_read_text_file", fmt.Sprintf(`{"path":%q}`, dir+"/hello.txt"), "hello from file"},
		{"memory_create_entities", `{"entities":[{"name":"n1","entityType":"t","observations":["o"]}]}`, "n1"},
		{"seq_sequentialthinking", `{"thought":"x","nextThoughtNeeded":false,"thoughtNumber":1,"totalThoughts":1}`, "thoughtNumber"},
	} {
		r, err := h.call(ctx, h.svc, c.tool, c.args)
		if err != nil {
			t.Errorf("%s: %v", c.tool, err)
			continue
		}
		if r.IsError || !strings.Contains(textOf(r), c.want) {
			t.Errorf("%s: is_error=%v %q", c.tool, r.IsError, textOf(r))
		}
	}
	// Progress notifications from a real server, over stdio and HTTP.
	for _, name := range []string{"everything_trigger-long-running-operation", "evhttp_trigger-long-running-operation", "evsse_trigger-long-running-operation"} {
		st, err := h.svc.CallToolStream(ctx, &catalogv1.CallToolStreamRequest{Name: name, Arguments: args(t, `{"duration": 0.3, "steps": 3}`)})
		if err != nil {
			t.Fatal(err)
		}
		progress, done := 0, false
		for {
			m, err := st.Recv()
			if err != nil {
				break
			}
			if n := m.GetNotification(); n != nil && n.Method == "notifications/progress" {
				progress++
			}
			if m.GetResult() != nil {
				done = strings.Contains(textOf(m.GetResult()), "completed")
			}
		}
		if progress != 3 || !done {
			t.Errorf("%s: %d progress notifications, result %v", name, progress, done)
		}
	}
	// Raw schemas: server-everything's zod schemas carry $schema, which a
	// typed re-marshal drops.
	gt, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "everything_echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gt.Tool.InputSchema.GetFields()["$schema"]; !ok {
		t.Errorf("everything_echo lost $schema: %v", gt.Tool.InputSchema)
	}
}

func startEverything(t *testing.T, js, mode string) string {
	t.Helper()
	l, _ := netListen()
	port := l
	cmd := exec.Command("node", js, mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd.Process.Pid); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 20*time.Second, "server-everything "+mode, func() bool { return dialOK(addr) })
	return "http://" + addr
}

// TestFailuresAreIsolated: a server that hangs at initialize (its timeout
// fires), one that exits at start (exit status and stderr tail), one with a
// missing variable (named) — the good one is READY regardless.
func TestFailuresAreIsolated(t *testing.T) {
	t.Setenv("TP_PRESENT", "x")
	ext := fmt.Sprintf(`{"mcpServers": {
		"hang": {"command": %q, "args": ["hang"], "session_init_timeout": 1},
		"crash": {"command": %q, "args": ["exit"]},
		"novar": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${TP_MISSING_VAR}"}},
		%s
	}}`, fixture, fixture, fixtureServer("good", `"env": {"X": "${TP_PRESENT}"}`))
	begin := time.Now()
	h := start(t, ext, nil)
	if d := time.Since(begin); d > 10*time.Second {
		t.Fatalf("discovery took %s; one broken server must not block the others", d)
	}
	if s := h.server("good"); s.State != catalogv1.ServerState_SERVER_STATE_READY || s.ToolCount == 0 {
		t.Fatalf("good: %v %s", s.State, s.LastError)
	}
	hang := h.server("hang")
	if hang.State == catalogv1.ServerState_SERVER_STATE_READY || !strings.Contains(hang.LastError, "session_init_timeout") {
		t.Errorf("hang: %v %q", hang.State, hang.LastError)
	}
	crash := h.server("crash")
	if !strings.Contains(crash.LastError, "status 3") || !strings.Contains(crash.LastError, "cannot start (on purpose)") {
		t.Errorf("crash: %v %q", crash.State, crash.LastError)
	}
	novar := h.server("novar")
	if novar.State != catalogv1.ServerState_SERVER_STATE_FAILED || !strings.Contains(novar.LastError, "TP_MISSING_VAR") {
		t.Errorf("novar: %v %q", novar.State, novar.LastError)
	}
	if novar.Config.Headers["Authorization"] != catalogconfig.Mask {
		t.Errorf("header not masked: %v", novar.Config.Headers)
	}
	if _, err := h.call(ctxT(t), h.svc, "good_echo", `{"message":"m"}`); err != nil {
		t.Fatal(err)
	}
}

// TestKillChildRestarts: a child killed mid-session is detected (FAILED,
// tools kept but unavailable, calls UNAVAILABLE), restarted with backoff,
// re-listed, the next call is served, and the hash is unchanged.
func TestKillChildRestarts(t *testing.T) {
	old := catalogmcp.BackoffInitial
	catalogmcp.BackoffInitial = time.Second
	t.Cleanup(func() { catalogmcp.BackoffInitial = old })
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	cat, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{})
	r, err := h.call(ctx, h.svc, "fx_pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(textOf(r))
	killPid(pid)
	var down *catalogv1.Server
	eventually(t, 5*time.Second, "FAILED after kill", func() bool {
		down = h.server("fx")
		return down.State == catalogv1.ServerState_SERVER_STATE_FAILED
	})
	if !strings.Contains(down.LastError, "killed by signal") || down.ToolCount == 0 {
		t.Errorf("down: %q tools=%d", down.LastError, down.ToolCount)
	}
	lt, _ := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{Server: "fx"})
	if len(lt.Tools) == 0 || lt.Tools[0].Available {
		t.Errorf("tools of a down server must stay listed, unavailable")
	}
	if _, err := h.call(ctx, h.svc, "fx_echo", `{}`); codeOf(err) != codes.Unavailable || !strings.Contains(err.Error(), "FAILED") {
		t.Errorf("call while down: %v", err)
	}
	eventually(t, 10*time.Second, "READY after restart", func() bool {
		return h.server("fx").State == catalogv1.ServerState_SERVER_STATE_READY
	})
	if s := h.server("fx"); s.RestartCount < 1 {
		t.Errorf("restart count %d", s.RestartCount)
	}
	r, err = h.call(ctx, h.svc, "fx_pid", `{}`)
	if err != nil || textOf(r) == strconv.Itoa(pid) {
		t.Fatalf("after restart: %v %s", err, textOf(r))
	}
	cat2, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{})
	if cat.CatalogHash != cat2.CatalogHash {
		t.Fatalf("hash changed across a restart: %s -> %s", cat.CatalogHash, cat2.CatalogHash)
	}
}

// TestListChangedAndWatch: a runtime tool addition (notifications/tools/
// list_changed) is re-listed and streamed by WatchCatalog with the new hash.
func TestListChangedAndWatch(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	w, err := h.svc.WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.Event.Type != catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_SNAPSHOT {
		t.Fatalf("first event: %v %v", first, err)
	}
	if _, err := h.call(ctx, h.svc, "fx_add_tool", `{}`); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event.Type == catalogv1.CatalogEventType_CATALOG_EVENT_TYPE_CHANGED {
			if !reflectContains(ev.Event.ToolsAdded, "fx_extra") || ev.Event.CatalogHash == first.Event.CatalogHash ||
				!reflectContains(ev.Event.ServersChanged, "fx") {
				t.Fatalf("event %v", ev.Event)
			}
			break
		}
	}
	if r, err := h.call(ctx, h.svc, "fx_extra", `{}`); err != nil || textOf(r) != "extra" {
		t.Fatalf("new tool: %v", err)
	}
}

func reflectContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestConfigEditReload: a content change of the file applies within 2 s;
// the unchanged server keeps its process.
func TestConfigEditReload(t *testing.T) {
	h := start(t, extJSON(fixtureServer("a", "")), nil)
	ctx := ctxT(t)
	pidA := h.srv.Manager().Statuses()[0].Pid
	if err := os.WriteFile(h.path, []byte(extJSON(fixtureServer("a", ""), fixtureServer("b", ""))), 0o600); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	eventually(t, 5*time.Second, "server b READY", func() bool {
		r, err := h.svc.GetServer(ctx, &catalogv1.GetServerRequest{Name: "b"})
		return err == nil && r.Server.State == catalogv1.ServerState_SERVER_STATE_READY
	})
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("reload took %s (want < 2 s)", d)
	}
	if p := h.srv.Manager().Statuses()[0].Pid; p != pidA {
		t.Errorf("unchanged server restarted: pid %d -> %d", pidA, p)
	}
	rr, err := h.admin.ReloadServers(ctx, &catalogv1.ReloadServersRequest{})
	if err != nil || len(rr.Unchanged) != 2 || len(rr.Restarted) != 0 {
		t.Fatalf("forced reload: %v %v", rr, err)
	}
}

// TestNames: collisions (first in config order keeps the plain name), a
// 70-character name, and names differing only by sanitised characters.
func TestNames(t *testing.T) {
	ext := extJSON(fixtureServer("one", `"tool_name_prefix": false`), fixtureServer("two", `"tool_name_prefix": false`))
	h := start(t, ext, nil)
	ctx := ctxT(t)
	lt, err := h.svc.ListTools(ctx, &catalogv1.ListToolsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*catalogv1.Tool{}
	for _, tl := range lt.Tools {
		if !catalognames.Valid.MatchString(tl.Name) {
			t.Errorf("invalid exposed name %q", tl.Name)
		}
		if byName[tl.Name] != nil {
			t.Errorf("duplicate %q", tl.Name)
		}
		byName[tl.Name] = tl
	}
	if e := byName["pid"]; e == nil || e.Server != "one" || e.Renamed {
		t.Fatalf("first server must keep the plain name: %v", e)
	}
	second := "pid_" + catalognames.Suffix("two", "pid", 8)
	if e := byName[second]; e == nil || e.Server != "two" || !e.Renamed {
		t.Fatalf("second server gets the suffix: %v", byName)
	}
	r1, _ := h.call(ctx, h.svc, "pid", `{}`)
	r2, _ := h.call(ctx, h.svc, second, `{}`)
	if textOf(r1) == textOf(r2) || textOf(r1) == "" {
		t.Fatalf("collided names routed to the same server: %s %s", textOf(r1), textOf(r2))
	}
	long := strings.Repeat("long", 17) + "xy"
	var longName, dot1, dot2 string
	for _, tl := range lt.Tools {
		if tl.Server != "one" {
			continue
		}
		switch tl.OriginalName {
		case long:
			longName = tl.Name
		case "dot.name":
			dot1 = tl.Name
		case "dot name":
			dot2 = tl.Name
		}
	}
	if len(longName) != 64 || dot1 == "" || dot1 == dot2 {
		t.Fatalf("long %q, dots %q %q", longName, dot1, dot2)
	}
	if r, err := h.call(ctx, h.svc, dot2, `{}`); err != nil || textOf(r) != "dot name" {
		t.Fatalf("sanitised name routes to its original: %v %q", err, textOf(r))
	}
}

// TestRawSchemaSurvives: $schema, $defs, $ref, additionalProperties and a
// root anyOf come out of GetTool JSON-equal to what the server sent.
func TestRawSchemaSurvives(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	gt, err := h.svc.GetTool(ctxT(t), &catalogv1.GetToolRequest{Name: "fx_schema"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := protojson.Marshal(gt.Tool.InputSchema)
	var a, b any
	json.Unmarshal(got, &a)
	json.Unmarshal([]byte(fixtureRawSchema), &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("schema changed:\n got %s\nwant %s", got, fixtureRawSchema)
	}
	if len(gt.Tool.Problems) != 0 {
		t.Errorf("root anyOf schema flagged: %v", gt.Tool.Problems)
	}
}

const fixtureRawSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"pos":{"type":"integer","minimum":1}},"anyOf":[{"type":"object","properties":{"id":{"$ref":"#/$defs/pos"}},"required":["id"],"additionalProperties":false},{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]+$"}},"required":["name"],"additionalProperties":{"type":"string"}}],"x-vendor":{"nested":[1,2.5,null,true]}}`

// TestSecretsAndReplace: secrets masked in responses; ReplaceServers with
// "***" keeps the stored value and the `${VAR}` placeholders; unknown keys
// survive; command policy violations are INVALID_ARGUMENT naming the field;
// admin only.
func TestSecretsAndReplace(t *testing.T) {
	t.Setenv("TP_SECRET", "s3cr3t")
	ext := `{"mcpServers": {` + fixtureServer("fx", `"env": {"API_TOKEN": "${TP_SECRET}", "PLAIN": "v"}, "oauth": {"client_secret": "zz"}`) + `}, "skills": {"keep": true}}`
	h := start(t, ext, nil)
	ctx := ctxT(t)
	ls, _ := h.svc.ListServers(ctx, &catalogv1.ListServersRequest{})
	b, _ := protojson.Marshal(ls)
	if strings.Contains(string(b), "TP_SECRET") || strings.Contains(string(b), "s3cr3t") || ls.Servers[0].Config.Env["PLAIN"] != "***" {
		t.Fatalf("secrets visible: %s", b)
	}
	cfg := ls.Servers[0].Config
	cfg.Description = "edited"
	cfg.Command = "node" // allowlisted; the fixture path is not
	cfg.Args = []string{"server.js"}
	if _, err := h.svc.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{cfg}}); codeOf(err) != codes.PermissionDenied {
		t.Fatalf("service credential must not replace servers: %v", err)
	}
	if _, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{cfg}}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(h.path)
	f, err := catalogconfig.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Servers[0]
	if s.Env["API_TOKEN"] != "${TP_SECRET}" || s.Env["PLAIN"] != "v" || s.Description != "edited" ||
		!strings.Contains(string(raw), `"client_secret":"zz"`) && !strings.Contains(string(raw), `"client_secret": "zz"`) ||
		!strings.Contains(string(raw), `"skills"`) {
		t.Fatalf("stored file: %s", raw)
	}
	for _, c := range []struct {
		mut  func(*catalogv1.ServerConfig)
		want string
	}{
		{func(c *catalogv1.ServerConfig) { c.Command = "/bin/sh" }, "mcpServers.fx.command"},
		{func(c *catalogv1.ServerConfig) { c.Args = []string{"-e", "x"} }, "mcpServers.fx.args[0]"},
		{func(c *catalogv1.ServerConfig) { c.Env = map[string]string{"NODE_OPTIONS": "--require x"} }, "mcpServers.fx.env.NODE_OPTIONS"},
		{func(c *catalogv1.ServerConfig) { c.Env = map[string]string{"NEW": "***"} }, "mcpServers.fx.env.NEW"},
	} {
		bad := *cfgClone(cfg)
		c.mut(&bad)
		_, err := h.admin.ReplaceServers(ctx, &catalogv1.ReplaceServersRequest{Servers: []*catalogv1.ServerConfig{&bad}})
		if codeOf(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
	// UpdateServer disables and persists.
	f2 := false
	up, err := h.admin.UpdateServer(ctx, &catalogv1.UpdateServerRequest{Name: "fx", Server: &catalogv1.ServerUpdate{Enabled: &f2}})
	if err != nil || up.Server.State != catalogv1.ServerState_SERVER_STATE_DISABLED {
		t.Fatalf("disable: %v %v", up, err)
	}
	raw, _ = os.ReadFile(h.path)
	if !strings.Contains(string(raw), `"enabled": false`) {
		t.Fatalf("not persisted: %s", raw)
	}
}

func cfgClone(c *catalogv1.ServerConfig) *catalogv1.ServerConfig {
	b, _ := protojson.Marshal(c)
	out := &catalogv1.ServerConfig{}
	protojson.Unmarshal(b, out)
	return out
}

// TestCallResults: content blocks of every type, structured content, tool
// errors, progress/log streaming, 5 MB results, errors by kind.
func TestCallResults(t *testing.T) {
	static := t.TempDir() + "/static.jsonl"
	os.WriteFile(static, []byte(`{"name":"st_tool","description":"a static tool","input_schema":null,"server":"origin-srv"}`+"\n"+
		`{"name":"st_str","description":"string schema","input_schema":{"type":"string"},"server":"origin-srv"}`+"\n"), 0o600)
	ext := extJSON(fixtureServer("fx", ""), fmt.Sprintf(`"cat": {"type": "static", "path": %q}`, static))
	h := start(t, ext, nil)
	ctx := ctxT(t)
	r, err := h.call(ctx, h.svc, "fx_content", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range r.Content {
		types = append(types, c.Type.String())
	}
	want := "CONTENT_BLOCK_TYPE_TEXT CONTENT_BLOCK_TYPE_IMAGE CONTENT_BLOCK_TYPE_AUDIO CONTENT_BLOCK_TYPE_RESOURCE_LINK CONTENT_BLOCK_TYPE_RESOURCE CONTENT_BLOCK_TYPE_RESOURCE"
	if strings.Join(types, " ") != want || r.Content[1].MimeType != "image/png" || r.Content[3].Uri != "file:///a.txt" ||
		r.Content[4].Text != "bee" || r.Content[5].Blob == "" || r.StructuredContent.GetFields()["s"].GetStringValue() != "x" {
		t.Fatalf("content: %v", r)
	}
	if r, err := h.call(ctx, h.svc, "fx_fail", `{}`); err != nil || !r.IsError {
		t.Fatalf("tool error must be a successful RPC with is_error: %v %v", r, err)
	}
	big, err := h.call(ctx, h.svc, "fx_big", `{"n": 5242880}`)
	if err != nil || len(textOf(big)) != 5<<20 {
		t.Fatalf("5 MB result: %v", err)
	}
	// Errors.
	if _, err := h.call(ctx, h.svc, "nope", `{}`); codeOf(err) != codes.NotFound || reasonOf(err) != "ERROR_REASON_TOOL_NOT_FOUND" {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := h.call(ctx, h.svc, "st_tool", `{}`); codeOf(err) != codes.FailedPrecondition {
		t.Errorf("static tool: %v", err)
	}
	gt, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "st_tool"})
	if err != nil || gt.Tool.Server != "origin-srv" || gt.Tool.Source != catalogv1.ToolSource_TOOL_SOURCE_STATIC {
		t.Errorf("static tool keeps its own server: %v %v", gt, err)
	}
	if gt, err := h.svc.GetTool(ctx, &catalogv1.GetToolRequest{Name: "st_str"}); err != nil || len(gt.Tool.Problems) != 1 ||
		!strings.Contains(gt.Tool.Problems[0], "not an object schema") || gt.Tool.InputSchema.GetFields()["type"].GetStringValue() != "string" {
		t.Errorf("a non-object schema is kept and flagged: %v %v", gt, err)
	}
	_, err = h.svc.CallTool(ctx, &catalogv1.CallToolRequest{Name: "fx_sleep", Arguments: args(t, `{"ms": 5000}`), Timeout: durationpb.New(200 * time.Millisecond)})
	if codeOf(err) != codes.DeadlineExceeded || reasonOf(err) != "ERROR_REASON_CALL_TIMEOUT" {
		t.Errorf("timeout: %v", err)
	}
	if _, err := h.call(ctx, h.user, "fx_echo", `{}`); codeOf(err) != codes.PermissionDenied {
		t.Errorf("a user credential calling CallTool directly must be refused: %v", err)
	}
	// Streaming.
	st, err := h.svc.CallToolStream(ctx, &catalogv1.CallToolStreamRequest{Name: "fx_progress", Arguments: args(t, `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var progress, logs int
	var final *catalogv1.CallToolResponse
	for {
		m, err := st.Recv()
		if err != nil {
			break
		}
		if n := m.GetNotification(); n != nil {
			if final != nil {
				t.Fatal("notification after the result")
			}
			if _, ok := n.Params.GetFields()["_meta"]; ok {
				t.Errorf("notification params gained a _meta the server did not send: %v", n.Params)
			}
			switch n.Method {
			case "notifications/progress":
				progress++
			case "notifications/message":
				logs++
			}
		}
		if res := m.GetResult(); res != nil {
			final = res
		}
	}
	if progress != 3 || logs != 1 || final == nil || textOf(final) != "done" {
		t.Fatalf("stream: progress=%d logs=%d final=%v", progress, logs, final)
	}
}

func TestResultTooLarge(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), func(_ *Config, env *svckit.Env) { env.MaxMessageBytes = 1 << 20 })
	_, err := h.call(ctxT(t), h.svc, "fx_big", `{"n": 5242880}`)
	if codeOf(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "maximum message size") {
		t.Fatalf("want RESOURCE_EXHAUSTED, got %v", err)
	}
}

// TestConcurrentShared: 50 concurrent calls multiplexed on one shared child.
func TestConcurrentShared(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	pids := sync.Map{}
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.call(ctx, h.svc, "fx_echo", fmt.Sprintf(`{"message":"m%d"}`, i))
			if err != nil {
				errs <- err
				return
			}
			if textOf(r) != fmt.Sprintf("echo: m%d", i) {
				errs <- fmt.Errorf("call %d got %q", i, textOf(r))
			}
			p, _ := h.call(ctx, h.svc, "fx_pid", `{}`)
			pids.Store(textOf(p), true)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	pids.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("shared scope used %d children", n)
	}
}

func actingFor(ctx context.Context, who string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, auth.ActingForHeader, "default/"+who)
}

// TestPerThreadScope: two users with the same thread id get two children;
// the user and thread come from the acting-for principal and the trusted
// CallContext; the LRU evicts beyond its cap.
func TestPerThreadScope(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", `"session_scope": "per_thread"`)), func(c *Config, _ *svckit.Env) { c.Sessions.MaxScoped = 2 })
	ctx := ctxT(t)
	pidFor := func(user, thread string) string {
		t.Helper()
		r, err := h.svc.CallTool(actingFor(ctx, user), &catalogv1.CallToolRequest{Name: "fx_pid", Arguments: args(t, `{}`),
			CallContext: &typev1.CallContext{ThreadId: thread}})
		if err != nil {
			t.Fatal(err)
		}
		return textOf(r)
	}
	a1, b1 := pidFor("alice", "t1"), pidFor("bob", "t1")
	if a1 == b1 {
		t.Fatal("two users, same thread id: must be two children")
	}
	if pidFor("alice", "t1") != a1 {
		t.Fatal("same user and thread must reuse the child")
	}
	if pidFor("alice", "t2") == a1 {
		t.Fatal("another thread must get another child")
	}
	keys := h.srv.Manager().Pool().Keys()
	if len(keys) != 2 {
		t.Fatalf("LRU cap 2 exceeded: %v", keys)
	}
	for _, k := range keys {
		if k.Subject == "bob" && k.Thread == "t1" {
			continue
		}
		if k.Subject == "alice" && (k.Thread == "t2" || k.Thread == "t1") {
			continue
		}
		t.Errorf("unexpected key %+v", k)
	}
	pid, _ := strconv.Atoi(a1)
	eventually(t, 5*time.Second, "evicted child to exit", func() bool { return !alive(pid) || pidFor("alice", "t1") == a1 })
}

// TestNoProcessLeftAfterClose: every child and grandchild (a chain like
// npx -> node) is gone after Close.
func TestNoProcessLeftAfterClose(t *testing.T) {
	ext := extJSON(fmt.Sprintf(`"chain": {"command": %q, "args": ["grandchild"]}`, fixture), fixtureServer("fx", `"session_scope": "per_user"`))
	h := start(t, ext, nil)
	ctx := ctxT(t)
	var pids []int
	r, err := h.call(ctx, h.svc, "chain_pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	grand, _ := strconv.Atoi(textOf(r))
	direct := h.srv.Manager().Statuses()[0].Pid
	r2, err := h.svc.CallTool(actingFor(ctx, "carol"), &catalogv1.CallToolRequest{Name: "fx_pid", Arguments: args(t, `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	scoped, _ := strconv.Atoi(textOf(r2))
	pids = append(pids, grand, direct, scoped, h.srv.Manager().Statuses()[1].Pid)
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not alive before close (%v)", p, pids)
		}
	}
	if grand == direct {
		t.Fatal("grandchild mode did not fork")
	}
	begin := time.Now()
	h.close()
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("Close took %s", d)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived Close", p)
		}
	}
}

// runCatalogHelper is the body of the helper process of the SIGKILL tests:
// a catalog manager running one server (TP_HELPER_SERVER, a JSON server
// entry; default: the fixture in grandchild mode); it prints
// "PIDS <direct child pid>" once the server is READY and waits to be killed.
func runCatalogHelper() {
	srv := catalogconfig.Server{Name: "chain", Command: os.Getenv("TP_FIXTURE"), Args: []string{"grandchild"}}
	if js := os.Getenv("TP_HELPER_SERVER"); js != "" {
		f, err := catalogconfig.Parse([]byte(`{"mcpServers": {"chain": ` + js + `}}`))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		srv = f.Servers[0]
	}
	m := catalogmcp.NewManager(catalogmcp.ManagerOptions{})
	m.Apply([]catalogconfig.Server{srv})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m.WaitSettled(ctx)
	st := m.Statuses()[0]
	if st.State != catalogmcp.StateReady {
		fmt.Println("ERR", st.State, st.LastError)
		os.Exit(1)
	}
	fmt.Printf("PIDS %d\n", st.Pid)
	select {}
}

// descendants returns pid and every process below it (from /proc).
func descendants(pid int) []int {
	parent := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[pp] = append(parent[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, parent[out[i]]...)
	}
	return out
}

func sigkillHelper(t *testing.T, server string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TP_CATALOG_HELPER=1", "TP_FIXTURE="+fixture, "TP_HELPER_SERVER="+server)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PIDS ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	var direct int
	fmt.Sscanf(line, "PIDS %d", &direct)
	tree := descendants(direct)
	if len(tree) < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("expected a child with a grandchild, got %v", tree)
	}
	cmd.Process.Kill()
	cmd.Wait()
	eventually(t, 5*time.Second, fmt.Sprintf("process tree %v to die after SIGKILL of the catalog", tree), func() bool {
		for _, p := range tree {
			if alive(p) {
				return false
			}
		}
		return true
	})
}

// TestNoProcessLeftAfterSIGKILL: when the catalog process itself is killed
// with SIGKILL, its child (Pdeathsig) and grandchild (stdin EOF, then the
// group kill) do not survive.
func TestNoProcessLeftAfterSIGKILL(t *testing.T) {
	sigkillHelper(t, "")
}

// TestNpxChainNoOrphans: the real `npx -> node` chain (npx --no-install
// from the installed npm folder, no network) leaves no process after Close
// nor after SIGKILL of the catalog.
func TestNpxChainNoOrphans(t *testing.T) {
	npmJS(t, "server-memory")
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx not installed")
	}
	dir := filepath.Join(moduleRoot(t), ".tools", "npm")
	server := fmt.Sprintf(`{"command": "npx", "args": ["--no-install", "mcp-server-memory"], "cwd": %q, "env": {"MEMORY_FILE_PATH": %q}}`, dir, filepath.Join(t.TempDir(), "m.jsonl"))
	h := start(t, `{"mcpServers": {"mem": `+server+`}}`, nil)
	if s := h.server("mem"); s.State != catalogv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("npx server: %v %s", s.State, s.LastError)
	}
	tree := descendants(h.srv.Manager().Statuses()[0].Pid)
	if len(tree) < 2 {
		t.Logf("npx did not fork (tree %v)", tree)
	}
	h.close()
	for _, p := range tree {
		if alive(p) {
			t.Errorf("pid %d of the npx tree %v survived Close", p, tree)
		}
	}
	sigkillHelper(t, server)
}

// TestSearchAndCatalog exercises SearchTools, GetCatalog candidates and the
// incremental index on the fixture and a static file.
func TestSearchAndCatalog(t *testing.T) {
	h := start(t, extJSON(fixtureServer("fx", "")), nil)
	ctx := ctxT(t)
	res, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "echo the message back"})
	if err != nil || len(res.Hits) == 0 || res.Hits[0].Tool.Name != "fx_echo" {
		t.Fatalf("search: %v %v", res, err)
	}
	sel, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "select:fx_pid,nope,fx_echo",
		Candidates: &typev1.StringList{Values: []string{"fx_echo", "fx_pid"}}})
	if err != nil || len(sel.Hits) != 2 {
		t.Fatalf("select: %v %v", sel, err)
	}
	gc, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{Values: []string{"fx_pid", "fx_echo", "ghost"}}})
	if gc.CatalogHash != sel.CatalogHash || gc.ToolCount != 2 || len(gc.Unknown) != 1 {
		t.Fatalf("candidate hash: %v vs %s", gc, sel.CatalogHash)
	}
	// The served hashes equal CatalogHash recomputed from the raw definitions.
	snap := h.srv.snap.Load()
	var all, two []HashInput
	for _, e := range snap.tools {
		in := HashInput{Name: e.tool.Name, Description: e.b.def.Description, Parameters: e.b.def.InputSchema}
		all = append(all, in)
		if e.tool.Name == "fx_pid" || e.tool.Name == "fx_echo" {
			two = append(two, in)
		}
	}
	wantAll, _ := CatalogHash(all)
	wantTwo, _ := CatalogHash(two)
	full, _ := h.svc.GetCatalog(ctx, &catalogv1.GetCatalogRequest{})
	if full.CatalogHash != wantAll || gc.CatalogHash != wantTwo {
		t.Fatalf("served hashes %s/%s, recomputed %s/%s", full.CatalogHash, gc.CatalogHash, wantAll, wantTwo)
	}
	if _, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: strings.Repeat("x", 5000)}); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("long query: %v", err)
	}
	empty, err := h.svc.SearchTools(ctx, &catalogv1.SearchToolsRequest{Query: "zzzqqqxxx"})
	if err != nil || len(empty.Hits) != 0 {
		t.Fatalf("no match is empty, not an error: %v %v", empty, err)
	}
}

// TestCancellationPropagates: a call that times out is cancelled on the
// server too (notifications/cancelled), over stdio and streamable HTTP.
func TestCancellationPropagates(t *testing.T) {
	port, _ := netListen()
	cmd := exec.Command(fixture, "http", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd.Process.Pid); cmd.Wait() })
	eventually(t, 10*time.Second, "fixture http", func() bool { return dialOK(fmt.Sprintf("127.0.0.1:%d", port)) })
	h := start(t, extJSON(fixtureServer("fx", ""), fmt.Sprintf(`"fxh": {"type": "http", "url": "http://127.0.0.1:%d/mcp"}`, port)), nil)
	ctx := ctxT(t)
	for _, srv := range []string{"fx", "fxh"} {
		_, err := h.svc.CallTool(ctx, &catalogv1.CallToolRequest{Name: srv + "_sleep", Arguments: args(t, `{"ms": 10000}`), Timeout: durationpb.New(300 * time.Millisecond)})
		if codeOf(err) != codes.DeadlineExceeded {
			t.Fatalf("%s: %v", srv, err)
		}
		eventually(t, 5*time.Second, srv+" server saw the cancellation", func() bool {
			r, err := h.call(ctx, h.svc, srv+"_cancelled", `{}`)
			return err == nil && textOf(r) == "1"
		})
	}
}

// TestHTTPSessionReinit: when a (legacy, sessionful) streamable HTTP server
// forgets the session — here it restarts — the server answers 404, the
// catalog re-initialises and the same call succeeds.
func TestHTTPSessionReinit(t *testing.T) {
	js := npmJS(t, "server-everything")
	port, _ := netListen()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	run := func() *exec.Cmd {
		cmd := exec.Command("node", js, "streamableHttp")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "server-everything http", func() bool { return dialOK(addr) })
		return cmd
	}
	first := run()
	h := start(t, extJSON(fmt.Sprintf(`"ev": {"type": "http", "url": "http://%s/mcp"}`, addr)), nil)
	ctx := ctxT(t)
	if s := h.server("ev"); s.ProtocolVersion != "2025-11-25" {
		t.Fatalf("expected a legacy sessionful server, got %q", s.ProtocolVersion)
	}
	if _, err := h.call(ctx, h.svc, "ev_echo", `{"message":"one"}`); err != nil {
		t.Fatal(err)
	}
	killGroup(first.Process.Pid)
	first.Wait()
	second := run()
	t.Cleanup(func() { killGroup(second.Process.Pid); second.Wait() })
	r, err := h.call(ctx, h.svc, "ev_echo", `{"message":"two"}`)
	if err != nil || !strings.Contains(textOf(r), "two") {
		t.Fatalf("call after the server lost the session: %v %v", r, err)
	}
}

// TestCloseNeverHangs: a child that ignores stdin EOF and SIGTERM is
// killed after the bound (close_grace per step) and Close returns.
func TestCloseNeverHangs(t *testing.T) {
	h := start(t, extJSON(fmt.Sprintf(`"stub": {"command": %q, "args": ["stubborn"]}`, fixture)), func(c *Config, _ *svckit.Env) {
		c.CloseGrace = 300 * time.Millisecond
	})
	r, err := h.call(ctxT(t), h.svc, "stub_pid", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(textOf(r))
	begin := time.Now()
	h.close()
	d := time.Since(begin)
	if alive(pid) {
		t.Fatal("stubborn child survived Close")
	}
	if d < 500*time.Millisecond || d > 5*time.Second {
		t.Errorf("Close took %s; expected the stdin and SIGTERM steps (2 x 300 ms) then SIGKILL", d)
	}
}

// TestMetrics: server readiness, restarts, tool count and call counters are
// exported on the registry the environment gives.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := start(t, extJSON(fixtureServer("fx", "")), func(_ *Config, env *svckit.Env) { env.Metrics = reg })
	if _, err := h.call(ctxT(t), h.svc, "fx_echo", `{}`); err != nil {
		t.Fatal(err)
	}
	h.call(ctxT(t), h.svc, "fx_nope", `{}`)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = v
		}
	}
	if got["toolplane_catalog_server_ready,server=fx"] != 1 || got["toolplane_catalog_tools"] < 10 ||
		got["toolplane_catalog_tool_calls_total,code=OK,server=fx"] != 1 {
		t.Fatalf("metrics: %v", got)
	}
}
