// Package arch enforces the module's import rules over its packages' direct
// non-test imports (docs/decisions/0021-import-rules-test.md):
//
//   - services/X never imports services/Y (a service's sub-packages count as
//     the service; services reach each other only through generated clients);
//   - no package of internal/ imports a service, except the composition root
//     (internal/app and its sub-packages), which wires them;
//   - cmd/, bench/ and tests/ may import anything.
//
// The rules are a pure function over an import table (Check), tested on
// synthetic tables; imports_test.go applies them to `go list` of the module.
package arch

import (
	"fmt"
	"sort"
	"strings"
)

// CompositionRoot is the one package tree of internal/ that may import
// services.
const CompositionRoot = "internal/app"

// Violation is one import that breaks a rule.
type Violation struct {
	// Package is the importing package, relative to the module ("internal/config").
	Package string
	// Import is the imported package, relative to the module ("services/catalog").
	Import string
	// Rule says which rule it breaks.
	Rule string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", v.Package, v.Import, v.Rule)
}

// Check applies the rules to imports (import path → its direct imports, as
// `go list` reports them) of the module whose path is module. Imports from
// outside the module are ignored. Violations come sorted by package, then
// import.
func Check(module string, imports map[string][]string) []Violation {
	var out []Violation
	for pkg, deps := range imports {
		p, ok := relative(module, pkg)
		if !ok {
			continue
		}
		for _, dep := range deps {
			d, ok := relative(module, dep)
			if !ok {
				continue
			}
			if rule := broken(p, d); rule != "" {
				out = append(out, Violation{Package: p, Import: d, Rule: rule})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Package != out[j].Package {
			return out[i].Package < out[j].Package
		}
		return out[i].Import < out[j].Import
	})
	return out
}

// broken returns the rule the import pkg → dep breaks, or "".
func broken(pkg, dep string) string {
	to := service(dep)
	if to == "" {
		return ""
	}
	if from := service(pkg); from != "" && from != to {
		return fmt.Sprintf("services/%s must not import services/%s (use its generated client)", from, to)
	}
	if under(pkg, "internal") && !under(pkg, CompositionRoot) {
		return fmt.Sprintf("only the composition root (%s) of internal/ may import a service", CompositionRoot)
	}
	return ""
}

// service returns X for services/X and services/X/..., else "".
func service(rel string) string {
	rest, ok := strings.CutPrefix(rel, "services/")
	if !ok || rest == "" {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// under reports whether rel is dir or inside it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// relative returns pkg relative to module, and whether it is in the module.
func relative(module, pkg string) (string, bool) {
	if pkg == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(pkg, module+"/")
	return rel, ok
}
