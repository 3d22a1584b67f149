// Command postprocess writes the served OpenAPI spec from the generated one
// (internal/openapispec); `make generate` runs it:
//
//	go run ./internal/openapispec/postprocess gen/openapi/toolplane.swagger.json internal/gateway/openapi.json
package main

import (
	"fmt"
	"os"

	"github.com/toolplane/toolplane/internal/openapispec"
	"github.com/toolplane/toolplane/internal/version"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: postprocess <generated.swagger.json> <served.json>")
		os.Exit(2)
	}
	in, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "postprocess:", err)
		os.Exit(1)
	}
	out, err := openapispec.Process(in, version.Release)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postprocess:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[2], out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "postprocess:", err)
		os.Exit(1)
	}
}
