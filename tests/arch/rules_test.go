package arch

import (
	"slices"
	"testing"
)

const mod = "example.com/m"

// TestCheckRules: each rule on a synthetic import table — what is allowed,
// what is reported, and how.
func TestCheckRules(t *testing.T) {
	table := map[string][]string{
		// Allowed: a service's own sub-packages, internal/ and gen/ from a
		// service, the composition root, cmd/, bench/, tests/, outside modules.
		mod + "/services/catalog":             {mod + "/services/catalog/catalogstore", mod + "/internal/svckit", mod + "/gen/go/catalog/v1", "fmt"},
		mod + "/services/catalog/catalogmcp":  {mod + "/services/catalog/catalogconfig", "github.com/other/services/x"},
		mod + "/internal/app":                 {mod + "/services/catalog", mod + "/services/runtime", mod + "/internal/config"},
		mod + "/internal/app/wiring":          {mod + "/services/authz"},
		mod + "/cmd/toolplane":                {mod + "/services/authz/authzcasbin", mod + "/internal/app"},
		mod + "/bench":                        {mod + "/services/skills"},
		mod + "/tests/deploy":                 {mod + "/services/runtime"},
		mod + "/internal/config":              {mod + "/internal/svckit", "go.yaml.in/yaml/v3"},
		"example.com/other/internal/x":        {"example.com/other/services/y"},
		mod + "/services":                     {mod + "/services/catalog"}, // not a service itself
		mod + "/internal/servicesx":           {mod + "/servicesx/catalog"},
		mod + "/services/runtime/runtimeloop": {mod + "/services/runtime"},
		// Broken.
		mod + "/services/runtime/runtimemcp": {mod + "/services/catalog/catalogconfig", mod + "/services/runtime"},
		mod + "/services/authz":              {mod + "/services/skills"},
		mod + "/internal/config2":            {mod + "/services/catalog"},
		mod + "/internal/apps":               {mod + "/services/runtime/runtimestore"},
		mod + "/internal/grpcx/sub":          {mod + "/services/authz/authzcasbin"},
	}
	got := Check(mod, table)
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	want := []string{
		"internal/apps imports services/runtime/runtimestore: only the composition root (internal/app) of internal/ may import a service",
		"internal/config2 imports services/catalog: only the composition root (internal/app) of internal/ may import a service",
		"internal/grpcx/sub imports services/authz/authzcasbin: only the composition root (internal/app) of internal/ may import a service",
		"services/authz imports services/skills: services/authz must not import services/skills (use its generated client)",
		"services/runtime/runtimemcp imports services/catalog/catalogconfig: services/runtime must not import services/catalog (use its generated client)",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", join(lines), join(want))
	}
	if len(Check(mod, nil)) != 0 {
		t.Error("an empty table has violations")
	}
}

func join(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}
