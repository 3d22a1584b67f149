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
	if n != 47 {
		t.Errorf("found %d RPCs; the contract of docs/architecture.md §2 has 47 (update this count with the contract)", n)
	}
}

var pathParam = regexp.MustCompile(`\{([^}=]+)(=[^}]*)?\}`)

func TestOpenAPIHasEveryRoute(t *testing.T) {
	var spec struct {
		Swagger string                                `json:"swagger"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(gateway.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile(filepath.Join("..", "..", "gen", "openapi", "toolplane.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(gen) != string(gateway.OpenAPI) {
		t.Fatal("internal/gateway/openapi.json differs from gen/openapi/toolplane.swagger.json: run make generate")
	}
	var missing []string
	for _, r := range loadRules(t) {
		m, p := r.methodPath()
		key := pathParam.ReplaceAllString(p, "{$1}")
		ops, ok := spec.Paths[key]
		if !ok {
			missing = append(missing, m+" "+key)
			continue
		}
		if _, ok := ops[strings.ToLower(m)]; !ok {
			missing = append(missing, m+" "+key)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("OpenAPI spec lacks %d routes:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}
