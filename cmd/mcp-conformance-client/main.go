// Command mcp-conformance-client is the client under test for the official
// MCP conformance suite (npm @modelcontextprotocol/conformance, client mode;
// scripts/conformance-client.sh). It is built on the catalog's MCP client
// layer (services/catalog/catalogmcp), so the suite exercises exactly the
// code the catalog uses to talk to MCP servers.
//
// The suite runs `mcp-conformance-client [flags] URL` with the scenario name
// in $MCP_CONFORMANCE_SCENARIO. The client connects over streamable HTTP
// (or SSE with --sse), initialises, lists the tools and calls each of them
// with arguments derived from its input schema (numbers 1, 2, ...; strings
// "test"; booleans true), printing the results. It exits non-zero on the
// first protocol error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

func main() {
	sse := flag.Bool("sse", false, "use the legacy HTTP+SSE transport")
	modern := flag.Bool("probe-modern", false, "probe server/discover (protocol 2026-07-28) before initialize")
	timeout := flag.Duration("timeout", 25*time.Second, "overall timeout")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: mcp-conformance-client [--sse] URL")
		os.Exit(2)
	}
	if err := run(flag.Arg(flag.NArg()-1), *sse, !*modern, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(url string, sse, legacy bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	typ := catalogconfig.TypeHTTP
	if sse {
		typ = catalogconfig.TypeSSE
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	s, err := catalogmcp.Connect(ctx, catalogconfig.Server{Name: "conformance", Type: typ, URL: url},
		catalogmcp.Options{Version: "0.1.0", LegacyOnly: legacy}, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer s.Close(2 * time.Second)
	fmt.Printf("scenario %q: connected to %s %s, protocol %s\n", scenario, s.ServerInfo.Name, s.ServerInfo.Version, s.ProtocolVersion)
	if scenario == "initialize" {
		return nil
	}
	tools, err := s.ListTools(ctx)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range tools {
		args := argsFor(t.InputSchema)
		res, err := s.CallTool(ctx, t.Name, args, func(n catalogmcp.Notification) {
			fmt.Printf("  notification %s %s\n", n.Method, n.Params)
		})
		if err != nil {
			return fmt.Errorf("tools/call %s: %w", t.Name, err)
		}
		fmt.Printf("tool %s(%s): isError=%v content=%d\n", t.Name, args, res.IsError, len(res.Content))
		for _, c := range res.Content {
			fmt.Printf("  %s\n", c)
		}
	}
	return nil
}

// argsFor builds arguments for every property of a JSON Schema object:
// numbers 1, 2, 3, ...; integers likewise; strings "test"; booleans true;
// arrays []; objects {}.
func argsFor(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]any{}
	n := 0
	for _, name := range names {
		t, _ := s.Properties[name].Type.(string)
		switch t {
		case "number", "integer":
			n++
			out[name] = n
		case "boolean":
			out[name] = true
		case "array":
			out[name] = []any{}
		case "object":
			out[name] = map[string]any{}
		default:
			out[name] = "test"
		}
	}
	b, _ := json.Marshal(out)
	return b
}
