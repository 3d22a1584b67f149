// Package openapispec turns the merged OpenAPI v2 spec that protoc-gen-openapiv2
// writes (gen/openapi/toolplane.swagger.json) into the spec Toolplane serves
// at /openapi.json (internal/gateway/openapi.json), without touching the
// routes of proto/toolplane/http.yaml (docs/decisions/0060-openapi-postprocess.md):
//
//   - info: a real title and description, and the release version
//     (internal/version.Release) instead of "version not set";
//   - a bearer security scheme (`Authorization: Bearer <token>`, declared as
//     an apiKey header because Swagger 2.0 has no http/bearer type), required
//     by every operation, with a 401 response on each;
//   - unique path templates: templates that differ only in the names of
//     their variables (`/v1/agents/{name}` and `/v1/agents/{agent.name}`) are
//     one path to OpenAPI; they are merged under the template whose variables
//     are plain identifiers, and the operations' path parameters renamed. The
//     URL a client builds is the same, so the gateway routes it as before;
//   - readable operation ids: `RuntimeService_AssembleTools` becomes
//     `assembleTools` (lowerCamel RPC name; the service is prefixed only if
//     two services share an RPC name).
//
// Process is deterministic (the output is committed and checked for drift).
package openapispec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// SecurityScheme is the name of the bearer scheme in securityDefinitions.
const SecurityScheme = "bearer"

// Title is the spec's info.title.
const Title = "Toolplane API"

const description = "REST mirror of Toolplane's gRPC services (catalog, authz, skills, runtime), " +
	"generated from the protobuf contracts and proto/toolplane/http.yaml. " +
	"Every call needs `Authorization: Bearer <token>` (a static token or a JWT). " +
	"Errors are a google.rpc.Status as JSON: `{\"code\", \"message\", \"details\"}`, " +
	"with google.rpc.ErrorInfo / BadRequest in `details` where the server adds them. " +
	"Custom methods are a `:verb` suffix on the last path segment " +
	"(`POST /v1/threads/{thread_id}:assemble`); ids never contain `:`. " +
	"Server-streaming routes answer newline-delimited JSON, one `{\"result\": ...}` per line."

var pathVar = regexp.MustCompile(`\{([^}]*)\}`)

// Process rewrites the generated spec in and returns the served spec.
// version is the release version written to info.version.
func Process(in []byte, version string) ([]byte, error) {
	var spec map[string]any
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("openapi: decode: %w", err)
	}
	if sw, _ := spec["swagger"].(string); sw != "2.0" {
		return nil, fmt.Errorf("openapi: swagger: got %q, want \"2.0\"", spec["swagger"])
	}
	if version == "" {
		return nil, fmt.Errorf("openapi: version: empty")
	}
	paths, ok := spec["paths"].(map[string]any)
	if !ok || len(paths) == 0 {
		return nil, fmt.Errorf("openapi: paths: missing or empty")
	}
	spec["info"] = map[string]any{
		"title":       Title,
		"version":     version,
		"description": description,
		"license":     map[string]any{"name": "Apache-2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"},
	}
	spec["securityDefinitions"] = map[string]any{
		SecurityScheme: map[string]any{
			"type":        "apiKey",
			"in":          "header",
			"name":        "Authorization",
			"description": "`Bearer <token>`: a static token or a JWT (README, \"Authentication\"). A missing or invalid credential answers 401 with code 16 (UNAUTHENTICATED).",
		},
	}
	bearer := []any{map[string]any{SecurityScheme: []any{}}}
	spec["security"] = bearer

	merged, err := mergeEquivalentPaths(paths)
	if err != nil {
		return nil, err
	}
	spec["paths"] = merged

	// Operation ids: lowerCamel RPC names, service-prefixed on a clash.
	type opRef struct {
		op      map[string]any
		service string
		rpc     string
	}
	var ops []opRef
	byRPC := map[string]int{}
	for _, p := range sortedKeys(merged) {
		item := merged[p].(map[string]any)
		for _, m := range sortedKeys(item) {
			op, ok := item[m].(map[string]any)
			if !ok || !isMethod(m) {
				continue
			}
			id, _ := op["operationId"].(string)
			svc, rpc, found := strings.Cut(id, "_")
			if !found || svc == "" || rpc == "" {
				return nil, fmt.Errorf("openapi: %s %s: operationId %q is not Service_Method", strings.ToUpper(m), p, id)
			}
			ops = append(ops, opRef{op, svc, rpc})
			byRPC[rpc]++
			op["security"] = bearer
			resp, _ := op["responses"].(map[string]any)
			if resp == nil {
				resp = map[string]any{}
				op["responses"] = resp
			}
			resp["401"] = map[string]any{
				"description": "No or invalid credential (UNAUTHENTICATED).",
				"schema":      map[string]any{"$ref": "#/definitions/rpcStatus"},
			}
		}
	}
	seen := map[string]bool{}
	for _, o := range ops {
		id := lowerFirst(o.rpc)
		if byRPC[o.rpc] > 1 {
			id = lowerFirst(strings.TrimSuffix(o.service, "Service")) + o.rpc
		}
		if seen[id] {
			return nil, fmt.Errorf("openapi: operationId %q is not unique", id)
		}
		seen[id] = true
		o.op["operationId"] = id
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(spec); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return out.Bytes(), nil
}

// mergeEquivalentPaths merges path items whose templates are equal once
// the variable names are ignored (OpenAPI 2.0 §Paths: such templates are
// identical and a spec must not hold both).
func mergeEquivalentPaths(paths map[string]any) (map[string]any, error) {
	groups := map[string][]string{}
	for p := range paths {
		shape := pathVar.ReplaceAllString(p, "{}")
		groups[shape] = append(groups[shape], p)
	}
	out := map[string]any{}
	for _, shape := range sortedKeys(groups) {
		members := groups[shape]
		if len(members) == 1 {
			out[members[0]] = paths[members[0]]
			continue
		}
		sort.Slice(members, func(i, j int) bool { return preferTemplate(members[i], members[j], paths) })
		keep := members[0]
		keepVars := vars(keep)
		item := paths[keep].(map[string]any)
		for _, other := range members[1:] {
			otherVars := vars(other)
			rename := map[string]string{}
			for i, v := range otherVars {
				rename[v] = keepVars[i]
			}
			for m, op := range paths[other].(map[string]any) {
				if _, clash := item[m]; clash {
					return nil, fmt.Errorf("openapi: %s %s and %s %s are the same route", strings.ToUpper(m), keep, strings.ToUpper(m), other)
				}
				if o, ok := op.(map[string]any); ok && isMethod(m) {
					renamePathParams(o, rename)
				}
				item[m] = op
			}
		}
		out[keep] = item
	}
	return out, nil
}

// preferTemplate orders candidate templates: variables that are plain
// identifiers (no field path like agent.name) first, then more operations,
// then lexical order.
func preferTemplate(a, b string, paths map[string]any) bool {
	da, db := strings.Count(strings.Join(vars(a), ""), "."), strings.Count(strings.Join(vars(b), ""), ".")
	if da != db {
		return da < db
	}
	na, nb := len(paths[a].(map[string]any)), len(paths[b].(map[string]any))
	if na != nb {
		return na > nb
	}
	return a < b
}

// renamePathParams renames the operation's path parameters; the original
// field path stays readable in the description.
func renamePathParams(op map[string]any, rename map[string]string) {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		pm, ok := p.(map[string]any)
		if !ok || pm["in"] != "path" {
			continue
		}
		name, _ := pm["name"].(string)
		to, ok := rename[name]
		if !ok || to == name {
			continue
		}
		pm["name"] = to
		d, _ := pm["description"].(string)
		pm["description"] = strings.TrimSpace(fmt.Sprintf("Sets `%s`. %s", name, d))
	}
}

func vars(p string) []string {
	var out []string
	for _, m := range pathVar.FindAllStringSubmatch(p, -1) {
		name, _, _ := strings.Cut(m[1], "=")
		out = append(out, name)
	}
	return out
}

func isMethod(m string) bool {
	switch m {
	case "get", "put", "post", "delete", "options", "head", "patch":
		return true
	}
	return false
}

func lowerFirst(s string) string {
	r := []rune(s)
	if len(r) == 0 {
		return s
	}
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
