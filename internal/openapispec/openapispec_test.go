package openapispec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const small = `{"swagger": "2.0", "info": {"title": "x.proto", "version": "version not set"},
 "paths": {
  "/v1/agents/{agent.name}": {"put": {"operationId": "RuntimeService_UpsertAgent",
     "parameters": [{"name": "agent.name", "in": "path", "required": true, "type": "string", "description": "Name."},
                    {"name": "agent", "in": "body", "schema": {"type": "object"}}]}},
  "/v1/agents/{name}": {"get": {"operationId": "RuntimeService_GetAgent",
     "parameters": [{"name": "name", "in": "path", "required": true, "type": "string"}]},
                        "delete": {"operationId": "RuntimeService_DeleteAgent",
     "parameters": [{"name": "name", "in": "path", "required": true, "type": "string"}]}},
  "/v1/a:list": {"get": {"operationId": "AService_List"}},
  "/v1/b:list": {"get": {"operationId": "BService_List"}}
 }}`

func process(t *testing.T, in string) map[string]any {
	t.Helper()
	out, err := Process([]byte(in), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMergeRenamesAndIDs(t *testing.T) {
	m := process(t, small)
	info := m["info"].(map[string]any)
	if info["title"] != Title || info["version"] != "1.2.3" {
		t.Errorf("info %v", info)
	}
	paths := m["paths"].(map[string]any)
	if _, ok := paths["/v1/agents/{agent.name}"]; ok {
		t.Error("the field-path template survived the merge")
	}
	item := paths["/v1/agents/{name}"].(map[string]any)
	want := map[string]string{"get": "getAgent", "delete": "deleteAgent", "put": "upsertAgent"}
	for meth, id := range want {
		op, ok := item[meth].(map[string]any)
		if !ok {
			t.Fatalf("%s missing from the merged path item", meth)
		}
		if op["operationId"] != id {
			t.Errorf("%s: operationId %v, want %s", meth, op["operationId"], id)
		}
		if _, ok := op["responses"].(map[string]any)["401"]; !ok {
			t.Errorf("%s: no 401", meth)
		}
		sec, _ := json.Marshal(op["security"])
		if string(sec) != `[{"bearer":[]}]` {
			t.Errorf("%s: security %s", meth, sec)
		}
	}
	p0 := item["put"].(map[string]any)["parameters"].([]any)[0].(map[string]any)
	if p0["name"] != "name" || !strings.Contains(p0["description"].(string), "agent.name") {
		t.Errorf("renamed parameter %v", p0)
	}
	// A shared RPC name gets the service as prefix.
	for p, id := range map[string]string{"/v1/a:list": "aList", "/v1/b:list": "bList"} {
		if got := paths[p].(map[string]any)["get"].(map[string]any)["operationId"]; got != id {
			t.Errorf("%s: operationId %v, want %s", p, got, id)
		}
	}
}

func TestProcessRefusesBadInput(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"not json":     {`{`, "decode"},
		"openapi 3":    {`{"openapi": "3.0.0", "paths": {"/a": {}}}`, "swagger"},
		"no paths":     {`{"swagger": "2.0"}`, "paths"},
		"bad op id":    {`{"swagger": "2.0", "paths": {"/a": {"get": {"operationId": "x"}}}}`, "Service_Method"},
		"same route":   {`{"swagger": "2.0", "paths": {"/a/{x}": {"get": {"operationId": "S_A"}}, "/a/{y}": {"get": {"operationId": "S_B"}}}}`, "same route"},
		"duplicate id": {`{"swagger": "2.0", "paths": {"/a": {"get": {"operationId": "S_A"}}, "/b": {"get": {"operationId": "S_A"}}}}`, "not unique"},
	} {
		_, err := Process([]byte(c.in), "1.0.0")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", name, err, c.want)
		}
	}
	if _, err := Process([]byte(small), ""); err == nil {
		t.Error("empty version accepted")
	}
}

// TestDeterministic: the committed spec is stable across runs.
func TestDeterministic(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "..", "gen", "openapi", "toolplane.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Process(in, "0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, _ := Process(in, "0.0.1")
		if string(a) != string(b) {
			t.Fatal("two runs differ")
		}
	}
}
