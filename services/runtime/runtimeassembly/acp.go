package runtimeassembly

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
)

// SourceACP is the fourth tool source: ACP agents run by the catalog
// (docs/deerflow.md §1.2 step 8; docs/decisions/0150-where-acp-and-workspace-servers-run.md).
const SourceACP = "acp"

// InvokeACPAgent is the one tool of the ACP source.
const InvokeACPAgent = "invoke_acp_agent"

// acpTool returns invoke_acp_agent when the catalog has at least one ACP
// agent, nil otherwise. A catalog without the RPC (an older release in a
// split deployment) has none. The tool is de-duplicated after MCP tools
// (config → built-ins → MCP → ACP) by the caller's merge.
func (s *Builder) acpTool(ctx context.Context) (*Tool, error) {
	resp, err := s.catalog.ListAcpAgents(ctx, &catalogv1.ListAcpAgentsRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ACPToolDef(resp.GetAgents()), nil
}

// ACPToolDef is the definition of invoke_acp_agent over agents (nil when
// there are none): `agent` is an enum of their names and the description
// lists what each does.
func ACPToolDef(agents []*catalogv1.AcpAgent) *Tool {
	if len(agents) == 0 {
		return nil
	}
	names := make([]string, 0, len(agents))
	var sb strings.Builder
	sb.WriteString("Delegate a self-contained task to an external coding agent (Agent Client Protocol). The agent works on its own in a workspace private to this thread, whose files you can read under /mnt/acp-workspace/, and returns its final answer; its permission requests are answered by policy (denied unless the operator allowed them). Available agents:")
	for _, a := range agents {
		names = append(names, a.GetName())
		fmt.Fprintf(&sb, "\n- %s: %s", a.GetName(), strings.ReplaceAll(a.GetDescription(), "\n", " "))
	}
	enum, _ := json.Marshal(names)
	schema := mustSchema(`{"type":"object","properties":{"agent":{"type":"string","enum":` + string(enum) + `,"description":"Name of the agent."},"prompt":{"type":"string","description":"Full instructions for the agent."}},"required":["agent","prompt"]}`)
	return &Tool{Name: InvokeACPAgent, Description: sb.String(), Params: schema, Source: SourceACP, Use: InvokeACPAgent, ACPAgents: names}
}
