// Package contract pins the API contract: every RPC of every service has
// exactly one HTTP rule in proto/toolplane/http.yaml, the rules equal the
// committed golden table routes.golden, and the merged OpenAPI spec served at
// /openapi.json carries every route.
package contract

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/gateway"
	"github.com/toolplane/toolplane/internal/openapispec"
	"github.com/toolplane/toolplane/internal/version"
)

var update = flag.Bool("update", false, "rewrite routes.golden from http.yaml")

type rule struct {
	Selector string `yaml:"selector"`
	Get      string `yaml:"get"`
	Post     string `yaml:"post"`
	Put      string `yaml:"put"`
	Patch    string `yaml:"patch"`
	Delete   string `yaml:"delete"`
	Body     string `yaml:"body"`
}

func (r rule) methodPath() (string, string) {
	for _, mp := range []struct{ m, p string }{{"GET", r.Get}, {"POST", r.Post}, {"PUT", r.Put}, {"PATCH", r.Patch}, {"DELETE", r.Delete}} {
		if mp.p != "" {
			return mp.m, mp.p
		}
	}
	return "", ""
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "proto", "toolplane", "http.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var svc struct {
		Type string `yaml:"type"`
		HTTP struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(data, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Type != "google.api.Service" {
		t.Fatalf("http.yaml type = %q", svc.Type)
	}
	return svc.HTTP.Rules
}

func services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, fd := range []protoreflect.FileDescriptor{
		catalogv1.File_toolplane_catalog_v1_catalog_service_proto,
		authzv1.File_toolplane_authz_v1_authz_service_proto,
		skillsv1.File_toolplane_skills_v1_skills_service_proto,
		runtimev1.File_toolplane_runtime_v1_runtime_service_proto,
	} {
		for i := 0; i < fd.Services().Len(); i++ {
			out = append(out, fd.Services().Get(i))
		}
	}
	return out
}

func TestRoutesGolden(t *testing.T) {
	rules := loadRules(t)
	var lines []string
	for _, r := range rules {
		m, p := r.methodPath()
		body := r.Body
		if body == "" {
			body = "-"
		}
		lines = append(lines, fmt.Sprintf("%-7s %-55s %-7s %s", m, p, body, r.Selector))
	}
	got := "# method path body selector — generated from proto/toolplane/http.yaml; `go test ./tests/contract -update` rewrites it.\n" + strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile("routes.golden", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("routes.golden")
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("http.yaml routes differ from routes.golden (a route change is a contract change):\n--- golden\n%s\n--- http.yaml\n%s", want, got)
	}
}

func TestEveryRPCHasExactlyOneRule(t *testing.T) {
	rules := loadRules(t)
	bySel := map[string]int{}
	for _, r := range rules {
		bySel[r.Selector]++
		if m, _ := r.methodPath(); m == "" {
			t.Errorf("%s: rule has no method", r.Selector)
		}
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(r.Selector)); err != nil {
			t.Errorf("rule for unknown RPC %s", r.Selector)
		}
	}
	n := 0
	for _, sd := range services() {
		for i := 0; i < sd.Methods().Len(); i++ {
			md := sd.Methods().Get(i)
			n++
			if c := bySel[string(md.FullName())]; c != 1 {
				t.Errorf("%s has %d HTTP rules; want 1", md.FullName(), c)
			}
		}
	}
	if n != 70 {
		t.Errorf("found %d RPCs; the contract of docs/architecture.md §2 has 70 (update this count with the contract)", n)
	}
}

var pathParam = regexp.MustCompile(`\{([^}=]+)(=[^}]*)?\}`)

// shape is a path template with its variable names dropped: two templates
// of the same shape are the same path to OpenAPI.
func shape(p string) string { return pathParam.ReplaceAllString(p, "{}") }

type servedSpec struct {
	Swagger string `json:"swagger"`
	Info    struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	} `json:"info"`
	SecurityDefinitions map[string]struct {
		Type string `json:"type"`
		In   string `json:"in"`
		Name string `json:"name"`
	} `json:"securityDefinitions"`
	Security []map[string][]string `json:"security"`
	Paths    map[string]map[string]struct {
		OperationID string                `json:"operationId"`
		Security    []map[string][]string `json:"security"`
		Parameters  []struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"paths"`
}

func loadServed(t *testing.T) servedSpec {
	t.Helper()
	var spec servedSpec
	if err := json.Unmarshal(gateway.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestOpenAPIIsProcessedGenerated: the served spec is exactly the generated
// one run through internal/openapispec (make generate keeps them in step).
func TestOpenAPIIsProcessedGenerated(t *testing.T) {
	gen, err := os.ReadFile(filepath.Join("..", "..", "gen", "openapi", "toolplane.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := openapispec.Process(gen, version.Release)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(gateway.OpenAPI) {
		t.Fatal("internal/gateway/openapi.json is not gen/openapi/toolplane.swagger.json post-processed: run make generate")
	}
}

func TestOpenAPIHasEveryRoute(t *testing.T) {
	spec := loadServed(t)
	byShape := map[string]string{}
	for p := range spec.Paths {
		if prev, dup := byShape[shape(p)]; dup {
			t.Errorf("paths %s and %s have the same template", prev, p)
		}
		byShape[shape(p)] = p
	}
	var missing []string
	for _, r := range loadRules(t) {
		m, p := r.methodPath()
		key, ok := byShape[shape(p)]
		if !ok {
			missing = append(missing, m+" "+p)
			continue
		}
		op, ok := spec.Paths[key][strings.ToLower(m)]
		if !ok {
			missing = append(missing, m+" "+p)
			continue
		}
		rpc := r.Selector[strings.LastIndexByte(r.Selector, '.')+1:]
		if want := strings.ToLower(rpc[:1]) + rpc[1:]; op.OperationID != want {
			t.Errorf("%s %s: operationId %q, want %q", m, p, op.OperationID, want)
		}
		// The path parameters are exactly the template's variables.
		var declared, inTemplate []string
		for _, prm := range op.Parameters {
			if prm.In == "path" {
				declared = append(declared, prm.Name)
			}
		}
		for _, v := range pathParam.FindAllStringSubmatch(key, -1) {
			inTemplate = append(inTemplate, v[1])
		}
		sort.Strings(declared)
		sort.Strings(inTemplate)
		if strings.Join(declared, ",") != strings.Join(inTemplate, ",") {
			t.Errorf("%s %s: path parameters %v, template %s has %v", m, p, declared, key, inTemplate)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("OpenAPI spec lacks %d routes:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// TestOpenAPIInfoAndSecurity: a real title, the release version (the newest
// CHANGELOG entry), and the bearer scheme required by every operation.
func TestOpenAPIInfoAndSecurity(t *testing.T) {
	spec := loadServed(t)
	if spec.Swagger != "2.0" {
		t.Errorf("swagger %q", spec.Swagger)
	}
	if spec.Info.Title != openapispec.Title {
		t.Errorf("info.title %q, want %q", spec.Info.Title, openapispec.Title)
	}
	changelog, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## v(\d+\.\d+\.\d+)\b`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no \"## vX.Y.Z\" entry")
	}
	if spec.Info.Version != version.Release || version.Release != string(m[1]) {
		t.Errorf("info.version %q, version.Release %q, newest CHANGELOG release %q: want all equal", spec.Info.Version, version.Release, m[1])
	}
	sd, ok := spec.SecurityDefinitions[openapispec.SecurityScheme]
	if !ok || sd.Type != "apiKey" || sd.In != "header" || sd.Name != "Authorization" {
		t.Errorf("securityDefinitions.%s = %+v (ok %v), want an apiKey header Authorization", openapispec.SecurityScheme, sd, ok)
	}
	requires := func(sec []map[string][]string) bool {
		for _, s := range sec {
			if _, ok := s[openapispec.SecurityScheme]; ok {
				return true
			}
		}
		return false
	}
	if !requires(spec.Security) {
		t.Errorf("top-level security %v does not require %s", spec.Security, openapispec.SecurityScheme)
	}
	ids := map[string]string{}
	n := 0
	for p, item := range spec.Paths {
		for meth, op := range item {
			n++
			where := strings.ToUpper(meth) + " " + p
			if !requires(op.Security) {
				t.Errorf("%s: security %v does not require %s", where, op.Security, openapispec.SecurityScheme)
			}
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s: no 401 response", where)
			}
			if prev, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %q on %s and %s", op.OperationID, prev, where)
			}
			ids[op.OperationID] = where
		}
	}
	if rules := len(loadRules(t)); n != rules {
		t.Errorf("%d operations in the spec, want %d (one per http.yaml rule)", n, rules)
	}
}
