//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/testkit"
)

// suiteServices are the four services' descriptors (names and RPCs).
var suiteServices = []grpc.ServiceDesc{
	catalogv1.CatalogService_ServiceDesc,
	authzv1.AuthzService_ServiceDesc,
	skillsv1.SkillsService_ServiceDesc,
	runtimev1.RuntimeService_ServiceDesc,
}

// listServices asks server reflection (v1) for the service names.
func listServices(t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: ""}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

// TestAllInOneDefault: `toolplane serve` with no config file and a fresh
// data dir serves all four services on loopback, with reflection, health
// per service, the OpenAPI spec, /healthz, /metrics per RPC, and the
// healthcheck and version commands.
func TestAllInOneDefault(t *testing.T) {
	p := testkit.Start(t, testkit.Options{})
	conn := p.Dial(t)

	if fi, err := os.Stat(p.DataDir); err != nil || !fi.IsDir() {
		t.Errorf("data dir %s was not created: %v", p.DataDir, err)
	}
	if !strings.Contains(p.Stderr(), "msg=serving") {
		t.Errorf("no `serving` log line on stderr:\n%s", p.Stderr())
	}

	t.Run("reflection", func(t *testing.T) {
		names := listServices(t, conn)
		for _, want := range []string{
			"toolplane.catalog.v1.CatalogService", "toolplane.authz.v1.AuthzService",
			"toolplane.skills.v1.SkillsService", "toolplane.runtime.v1.RuntimeService",
			"grpc.health.v1.Health",
		} {
			if !slices.Contains(names, want) {
				t.Errorf("reflection does not list %s; got %v", want, names)
			}
		}
	})

	t.Run("health per service", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, sd := range suiteServices {
			st, err := p.Health(ctx, conn, sd.ServiceName)
			if err != nil || st != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health of %s: %s, %v; want SERVING", sd.ServiceName, st, err)
			}
		}
		// An unknown service is NOT_FOUND, not SERVING.
		_, err := p.Health(ctx, conn, "toolplane.nope.v1.NopeService")
		wantCode(t, "health of an unknown service", err, codes.NotFound)
	})

	t.Run("openapi has every route", func(t *testing.T) {
		resp, err := p.HTTPClient().Get(p.URL("/openapi.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /openapi.json: %d", resp.StatusCode)
		}
		var spec struct {
			Paths map[string]map[string]struct {
				OperationID string `json:"operationId"`
			} `json:"paths"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&spec); err != nil {
			t.Fatalf("decode /openapi.json: %v", err)
		}
		rules := httpRules(t)
		// Every RPC of the four services has a rule (so the http.yaml list
		// is the whole of docs/architecture.md §2's tables).
		for _, sd := range suiteServices {
			for _, m := range sd.Methods {
				if _, ok := rules[sd.ServiceName+"."+m.MethodName]; !ok {
					t.Errorf("http.yaml has no rule for %s.%s", sd.ServiceName, m.MethodName)
				}
			}
			for _, m := range sd.Streams {
				if _, ok := rules[sd.ServiceName+"."+m.StreamName]; !ok {
					t.Errorf("http.yaml has no rule for %s.%s", sd.ServiceName, m.StreamName)
				}
			}
		}
		if len(rules) < 40 {
			t.Errorf("only %d rules in http.yaml", len(rules))
		}
		// Templates that differ only in variable names are one OpenAPI path
		// (internal/openapispec merges them): look routes up by shape.
		byShape := map[string]string{}
		for p := range spec.Paths {
			byShape[openAPIShape(p)] = p
		}
		for sel, r := range rules {
			ops, ok := spec.Paths[byShape[openAPIShape(r.path)]]
			if !ok {
				t.Errorf("%s: path %s (%s) missing from /openapi.json", sel, openAPIPath(r.path), r.path)
				continue
			}
			op, ok := ops[r.method]
			if !ok {
				t.Errorf("%s: %s %s missing from /openapi.json", sel, strings.ToUpper(r.method), r.path)
				continue
			}
			rpc := sel[strings.LastIndexByte(sel, '.')+1:]
			if want := strings.ToLower(rpc[:1]) + rpc[1:]; op.OperationID != want {
				t.Errorf("%s: %s %s has operationId %q, want %q", sel, strings.ToUpper(r.method), r.path, op.OperationID, want)
			}
		}
	})

	t.Run("rest routing errors", func(t *testing.T) {
		// A wrong method: 405 with Allow (not 501); a ':' in an id: 400
		// naming the field (GetThread is not reached with "<id>:assemble").
		send := func(method, path, body string) (*http.Response, string) {
			t.Helper()
			req, err := http.NewRequest(method, p.URL(path), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := p.HTTPClient().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			return resp, string(raw)
		}
		for _, c := range []struct{ method, path, allow string }{
			{http.MethodGet, "/v1/tools:search", "POST"},
			{http.MethodDelete, "/v1/threads", "GET, POST"},
			{http.MethodPut, "/v1/threads/x:assemble", "POST"},
			{http.MethodPost, "/healthz", "GET, HEAD"},
		} {
			resp, raw := send(c.method, c.path, "")
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
				t.Errorf("%s %s: %d Allow %q, want 405 Allow %q: %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow, raw)
			}
		}
		resp, raw := send(http.MethodPost, "/v1/threads", "{}")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/threads: %d %s", resp.StatusCode, raw)
		}
		var created struct {
			Thread struct {
				ThreadID string `json:"thread_id"`
			} `json:"thread"`
		}
		if err := json.Unmarshal([]byte(raw), &created); err != nil || created.Thread.ThreadID == "" {
			t.Fatalf("POST /v1/threads: no thread id in %s (%v)", raw, err)
		}
		id := created.Thread.ThreadID
		resp, raw = send(http.MethodGet, "/v1/threads/"+id+":assemble", "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(raw, `"field":"thread_id"`) || !strings.Contains(raw, "google.rpc.BadRequest") {
			t.Errorf("GET /v1/threads/<id>:assemble: %d %s; want 400 with a BadRequest for thread_id", resp.StatusCode, raw)
		}
		if resp, raw := send(http.MethodPost, "/v1/threads/"+id+":assemble", "{}"); resp.StatusCode != http.StatusOK {
			t.Errorf("POST /v1/threads/<id>:assemble: %d %s", resp.StatusCode, raw)
		}
		if resp, raw := send(http.MethodGet, "/v1/threads/"+id, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/threads/<id>: %d %s", resp.StatusCode, raw)
		}
	})

	t.Run("healthz", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := p.HTTPClient().Get(p.URL(path))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
			}
		}
	})

	t.Run("metrics per RPC", func(t *testing.T) {
		// Two gRPC calls and one REST call (through the gateway) of WhoAmI,
		// one call of a runtime RPC.
		for i := 0; i < 2; i++ {
			if _, err := whoAmI(t, conn, ""); err != nil {
				t.Fatalf("WhoAmI: %v", err)
			}
		}
		if r := rest(t, p, http.MethodGet, "/v1/testonly/whoami", "", ""); r.Status != http.StatusOK {
			t.Fatalf("GET /v1/testonly/whoami: %d %s", r.Status, r.Raw)
		}
		_ = invoke(t, conn, mListThreads, "", &runtimev1.ListThreadsRequest{}, &runtimev1.ListThreadsResponse{})
		m := scrape(t, p)
		if got := m.sum("grpc_server_handled_total", `grpc_method="WhoAmI"`, `grpc_service="toolplane.testonly.v1.SleepService"`, `grpc_code="OK"`); got != 3 {
			t.Errorf("grpc_server_handled_total{WhoAmI,OK} = %v, want 3", got)
		}
		if got := m.sum("grpc_server_handled_total", `grpc_method="ListThreads"`, `grpc_service="toolplane.runtime.v1.RuntimeService"`); got < 1 {
			t.Errorf("grpc_server_handled_total{ListThreads} = %v, want >= 1", got)
		}
		if got := m.sum("grpc_server_handling_seconds_count", `grpc_method="WhoAmI"`); got != 3 {
			t.Errorf("grpc_server_handling_seconds_count{WhoAmI} = %v, want 3", got)
		}
		// Every RPC of every service has its series from the start.
		for _, sd := range suiteServices {
			for _, md := range sd.Methods {
				if !m.has("grpc_server_started_total", `grpc_method="`+md.MethodName+`"`, `grpc_service="`+sd.ServiceName+`"`) {
					t.Errorf("no grpc_server_started_total series for %s/%s", sd.ServiceName, md.MethodName)
				}
			}
		}
	})

	t.Run("REST enums by name or number", func(t *testing.T) {
		// catalog SearchTools' `mode` is an enum (SEARCH_MODE_BM25 = 2).
		for _, body := range []string{`{"query": "weather", "mode": "SEARCH_MODE_BM25"}`, `{"query": "weather", "mode": 2}`} {
			r := rest(t, p, http.MethodPost, "/v1/tools:search", "", body)
			if r.Status != http.StatusOK {
				t.Errorf("POST /v1/tools:search %s: %d %s", body, r.Status, r.Raw)
				continue
			}
			if m, ok := r.Body["mode"]; ok {
				if _, isName := m.(string); !isName {
					t.Errorf("enum emitted as %v (%T), want its name", m, m)
				}
			}
		}
		for _, body := range []string{`{"query": "weather", "mode": "SEARCH_MODE_NOPE"}`, `{"query": "weather", "colour": "red"}`} {
			if r := rest(t, p, http.MethodPost, "/v1/tools:search", "", body); r.Status != http.StatusBadRequest {
				t.Errorf("POST /v1/tools:search %s: %d %s, want 400", body, r.Status, r.Raw)
			}
		}
	})

	t.Run("REST error body same for unary and streaming", func(t *testing.T) {
		// An unknown tool is NOT_FOUND for CallTool (unary) and
		// CallToolStream (server stream) alike.
		unary := rest(t, p, http.MethodPost, "/v1/tools/e2e-no-such-tool:call", "", "{}")
		stream := rest(t, p, http.MethodPost, "/v1/tools/e2e-no-such-tool:callStream", "", "{}")
		if unary.Status != http.StatusNotFound || stream.Status != unary.Status {
			t.Errorf("HTTP status: unary %d, stream %d; want 404 both", unary.Status, stream.Status)
		}
		if unary.Body["code"] == nil || unary.Body["message"] == nil {
			t.Fatalf("unary error body %s lacks code/message", unary.Raw)
		}
		if !reflect.DeepEqual(stream.Body, unary.Body) {
			t.Errorf("error bodies differ:\nunary:  %s\nstream: %s", unary.Raw, stream.Raw)
		}
	})

	t.Run("healthcheck command", func(t *testing.T) {
		r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", p.GRPCAddr)
		if r.Code != 0 || !strings.Contains(r.Stdout, "SERVING") {
			t.Errorf("healthcheck: exit %d, stdout %q, stderr %q; want 0 and SERVING", r.Code, r.Stdout, r.Stderr)
		}
		r = testkit.Run(t, nil, "healthcheck", "--grpc-addr", p.GRPCAddr, "--service", "toolplane.runtime.v1.RuntimeService")
		if r.Code != 0 {
			t.Errorf("healthcheck --service runtime: exit %d, stderr %q", r.Code, r.Stderr)
		}
	})

	t.Run("version command", func(t *testing.T) {
		r := testkit.Run(t, nil, "version")
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "toolplane ") || len(strings.TrimSpace(r.Stdout)) <= len("toolplane") {
			t.Errorf("version: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	})

	if code := p.Stop(t); code != 0 {
		t.Errorf("exit code after SIGTERM: %d, want 0; stderr:\n%s", code, p.Stderr())
	}
	// With the suite gone, the healthcheck fails.
	if r := testkit.Run(t, nil, "healthcheck", "--grpc-addr", p.GRPCAddr, "--timeout", "1s"); r.Code != 1 {
		t.Errorf("healthcheck of a stopped suite: exit %d, want 1 (stderr %q)", r.Code, r.Stderr)
	}
}

// TestPanicRecovered: a panicking handler answers INTERNAL naming the
// request id, and the process keeps serving.
func TestPanicRecovered(t *testing.T) {
	p := testkit.Start(t, testkit.Options{})
	conn := p.Dial(t)
	err := invoke(t, conn, mPanic, "", nil, nil)
	wantCode(t, "Panic", err, codes.Internal)
	if err != nil && !strings.Contains(err.Error(), "request id") {
		t.Errorf("panic error %q does not name the request id", err)
	}
	if _, err := whoAmI(t, conn, ""); err != nil {
		t.Errorf("WhoAmI after a panic: %v", err)
	}
	if !strings.Contains(p.Stderr(), "deliberate panic") {
		t.Errorf("the panic is not logged:\n%s", p.Stderr())
	}
}

// httpRule is one rule of proto/toolplane/http.yaml.
type httpRule struct {
	method, path string
}

// httpRules parses proto/toolplane/http.yaml: selector → rule.
func httpRules(t *testing.T) map[string]httpRule {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "proto", "toolplane", "http.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		HTTP struct {
			Rules []map[string]string `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("http.yaml: %v", err)
	}
	out := map[string]httpRule{}
	for _, r := range doc.HTTP.Rules {
		sel := r["selector"]
		for _, m := range []string{"get", "post", "put", "patch", "delete"} {
			if p, ok := r[m]; ok {
				out[sel] = httpRule{method: m, path: p}
			}
		}
		if _, ok := out[sel]; !ok {
			t.Errorf("http.yaml rule %s has no method", sel)
		}
	}
	return out
}

var wildcardVar = regexp.MustCompile(`\{([a-z_.]+)=[^}]*\}`)

// openAPIPath is the OpenAPI form of an http.yaml path template:
// `{path=**}` becomes `{path}`; field names stay as in the proto.
func openAPIPath(p string) string { return wildcardVar.ReplaceAllString(p, "{$1}") }

var anyVar = regexp.MustCompile(`\{[^}]*\}`)

// openAPIShape is a path template with its variable names dropped.
func openAPIShape(p string) string { return anyVar.ReplaceAllString(p, "{}") }

// metricsText is a scraped Prometheus text exposition.
type metricsText []string

func scrape(t *testing.T, p *testkit.Process) metricsText {
	t.Helper()
	resp, err := p.HTTPClient().Get(p.URL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	var lines metricsText
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

func (m metricsText) match(name string, labels []string) []string {
	var out []string
	for _, l := range m {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		ok := true
		for _, lab := range labels {
			if !strings.Contains(l, lab) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func (m metricsText) has(name string, labels ...string) bool { return len(m.match(name, labels)) > 0 }

// sum adds the values of the series of name carrying every label.
func (m metricsText) sum(name string, labels ...string) float64 {
	var s float64
	for _, l := range m.match(name, labels) {
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			panic(fmt.Sprintf("metric line %q: %v", l, err))
		}
		s += v
	}
	return s
}

// TestServeNoFlags: `toolplane serve` exactly as a new user types it — no
// config, no flags — serves all four services on 127.0.0.1:7420/7421 with
// ./data. Skipped when another process holds those ports.
func TestServeNoFlags(t *testing.T) {
	for _, a := range []string{"127.0.0.1:7420", "127.0.0.1:7421"} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Skipf("default port busy (%v); covered by TestAllInOneDefault with explicit ports", err)
		}
		l.Close()
	}
	p := testkit.Start(t, testkit.Options{Bare: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := p.Dial(t)
	for _, sd := range suiteServices {
		if st, err := p.Health(ctx, conn, sd.ServiceName); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %s: %s, %v", sd.ServiceName, st, err)
		}
	}
	if fi, err := os.Stat(p.DataDir); err != nil || !fi.IsDir() {
		t.Errorf("./data not created in the working directory: %v", err)
	}
	if r := testkit.Run(t, nil, "healthcheck"); r.Code != 0 {
		t.Errorf("healthcheck with its default address: exit %d, %s", r.Code, r.Stderr)
	}
}
