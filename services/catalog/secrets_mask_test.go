package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolplane/toolplane/internal/observability"
	"github.com/toolplane/toolplane/internal/svckit"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestSecretsNeverLeave plants a secret in each source the issue names — a
// `${VAR}` value (plain and secret-named), a literal env value, a header
// value, a URL query parameter, an OAuth client secret — in a server that
// makes it come back in an error (the child prints it to stderr, the peer
// echoes it, the transport error quotes the URL), and asserts it appears in
// none of the outputs: ListServers and GetServer last_error, WatchCatalog
// events, CallTool error texts, and every log line (the suite's logger).
// Each output must still say what failed ("***" where the value was).
func TestSecretsNeverLeave(t *testing.T) {
	secrets := map[string]string{
		"plain var":     "plainvar-S1-7f3a9c21",
		"secret var":    "tokvar-S2-0b8d4e55",
		"literal env":   "literalenv-S3-9e1c7a40",
		"header":        "hdr-S4-5a6b7c8d9e",
		"query":         "qry-S5-1122334455",
		"oauth secret":  "oauth-S6-aabbccddee",
		"bearer header": "bearer-S7-ffeeddcc",
	}
	t.Setenv("PLAIN_ARG", secrets["plain var"])
	t.Setenv("MY_TOKEN", secrets["secret var"])
	t.Setenv("OAUTH_SECRET", secrets["oauth secret"])
	// A peer that echoes what it was sent (headers and form) in a 500.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		http.Error(w, fmt.Sprintf("upstream refused: headers=%v body=%s", r.Header, b), http.StatusInternalServerError)
	}))
	defer echo.Close()
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"stdio-leak": map[string]any{"command": "sh", "args": []string{"-c", `echo "boot with $$1 env $$LIT tok $$API_TOKEN" >&2; exit 3`, "x", "${PLAIN_ARG}"},
			"env": map[string]string{"LIT": secrets["literal env"], "API_TOKEN": "${MY_TOKEN}"}},
		"http-leak": map[string]any{"type": "http", "url": echo.URL + "/mcp",
			"headers": map[string]string{"X-Api-Key": secrets["header"], "Authorization": "Bearer " + secrets["bearer header"]}},
		// A value written in the configuration masks this server's texts
		// only: it cannot make the process's other log lines hide a text.
		"vandal":     map[string]any{"command": "sh", "args": []string{"-c", "exit 1"}, "env": map[string]string{"X": "MCP server CONNECTING"}},
		"query-leak": map[string]any{"type": "http", "url": "http://127.0.0.1:1/mcp?sig=" + secrets["query"]},
		"oauth-leak": map[string]any{"type": "http", "url": echo.URL + "/mcp",
			"oauth": map[string]any{"token_url": echo.URL + "/token", "client_id": "cid", "client_secret": "${OAUTH_SECRET}"}},
	}})
	logs := &syncBuf{}
	h := start(t, string(ext), func(_ *Config, e *svckit.Env) {
		e.Logger = observability.NewLogger(logs, "debug", "text")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch, err := h.svc.WatchCatalog(ctx, &catalogv1.WatchCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	eventually(t, 15e9, "every server FAILED or waiting", func() bool {
		res, err := h.svc.ListServers(ctx, &catalogv1.ListServersRequest{})
		if err != nil {
			return false
		}
		n := 0
		for _, s := range res.GetServers() {
			if s.GetLastError() != "" {
				n++
			}
		}
		return n == 5
	})
	res, _ := h.svc.ListServers(ctx, &catalogv1.ListServersRequest{})
	for _, s := range res.GetServers() {
		outputs = append(outputs, "ListServers "+s.GetConfig().GetName()+": "+s.GetLastError())
		g, err := h.svc.GetServer(ctx, &catalogv1.GetServerRequest{Name: s.GetConfig().GetName()})
		if err == nil {
			outputs = append(outputs, "GetServer: "+g.GetServer().GetLastError())
		}
		_, err = h.svc.CallTool(ctx, &catalogv1.CallToolRequest{Name: s.GetConfig().GetName() + "__anything"})
		outputs = append(outputs, fmt.Sprint("CallTool: ", err))
	}
	for range 3 {
		ev, err := watch.Recv()
		if err != nil {
			break
		}
		b, _ := json.Marshal(ev)
		outputs = append(outputs, "WatchCatalog: "+string(b))
	}
	outputs = append(outputs, "logs: "+logs.String())
	all := strings.Join(outputs, "\n")
	for src, v := range secrets {
		if strings.Contains(all, v) {
			for _, o := range outputs {
				if strings.Contains(o, v) {
					t.Errorf("%s secret leaked: %.400s", src, o)
				}
			}
		}
	}
	// The texts still tell what failed, with the mask where the value was.
	for _, want := range []string{"boot with *** env *** tok ***", "sig=***", `msg="catalog: MCP server CONNECTING" server=http-leak`} {
		if !strings.Contains(all, want) {
			t.Errorf("no output shows %q:\n%.3000s", want, all)
		}
	}
	if t.Failed() {
		t.Logf("outputs:\n%.6000s", all)
	}
}

// TestToolResultsMasked: a real server-everything with env
// MY_API_KEY=${SOME_VAR} (and a literal env value) hands the values back
// through its get-env and echo tools and the args-prompt prompt; the
// catalog masks them in the CallTool result (stdio and the text a model
// would see) and in prompts/get, before anything downstream sees them
// (docs/decisions/0117-one-masking-facility.md).
func TestToolResultsMasked(t *testing.T) {
	ev := npmJS(t, "server-everything")
	const secret = "sk-live-S8-4c9d0e1f2a"
	const literal = "literal-S9-77aa88bb"
	t.Setenv("SOME_VAR", secret)
	ext, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "node", "args": []string{ev, "stdio"},
			"env": map[string]string{"MY_API_KEY": "${SOME_VAR}", "PLAIN_SETTING": literal}},
	}})
	h := start(t, string(ext), nil)
	ctx := ctxT(t)
	r, err := h.call(ctx, h.svc, "everything_get-env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := protojson.Marshal(r)
	got := string(b)
	if strings.Contains(got, secret) || strings.Contains(got, literal) {
		t.Errorf("get-env result carries a secret: %.2000s", got)
	}
	for _, want := range []string{`"MY_API_KEY": "***"`, `"PLAIN_SETTING": "***"`} {
		if !strings.Contains(textOf(r), want) {
			t.Errorf("get-env result lacks %s: %.2000s", want, textOf(r))
		}
	}
	r, err = h.call(ctx, h.svc, "everything_echo", fmt.Sprintf(`{"message":"key is %s"}`, secret))
	if err != nil {
		t.Fatal(err)
	}
	if textOf(r) != "Echo: key is ***" {
		t.Errorf("echo result: %q", textOf(r))
	}
	gp, err := h.svc.GetPrompt(ctx, &catalogv1.GetPromptRequest{Name: "everything_args-prompt", Arguments: map[string]string{"city": secret}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(gp.GetResultJson(), secret) || !strings.Contains(gp.GetResultJson(), "What's weather in ***?") {
		t.Errorf("prompts/get result: %s", gp.GetResultJson())
	}
}
