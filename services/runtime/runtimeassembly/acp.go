package runtimeassembly

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// SourceACP is the fourth tool source: ACP agents run by the catalog
// (docs/deerflow.md §1.2 step 8; docs/decisions/0150-where-acp-and-workspace-servers-run.md).
const SourceACP = "acp"

// InvokeACPAgent is the one tool of the ACP source.
const InvokeACPAgent = "invoke_acp_agent"

// acpTool returns invoke_acp_agent when the catalog has at least one ACP
// agent the principal may list (authz acp_agent:<name>, list; fail closed
// like the other filters), nil otherwise, and the policy version decided
// on. A catalog without the RPC (an older release in a split deployment)
// has none. The tool is de-duplicated after MCP tools (config → built-ins
// → MCP → ACP) by the caller's merge; the agent a call names is authorized
// again by the chain (runtimechain/authorizeacp.go).
func (s *Builder) acpTool(ctx context.Context, p *typev1.Principal, cc *typev1.CallContext, b *Base) (*Tool, int64, error) {
	resp, err := s.catalog.ListAcpAgents(ctx, &catalogv1.ListAcpAgentsRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, assemblyFailed("catalog unreachable while listing ACP agents: %s", ShortErr(err))
	}
	names := make([]string, 0, len(resp.GetAgents()))
	for _, a := range resp.GetAgents() {
		names = append(names, a.GetName())
	}
	allowed, denied, version, failOpen, err := s.filter(ctx, p, cc, authzv1.ResourceType_RESOURCE_TYPE_ACP_AGENT, names, nil)
	if err != nil {
		return nil, 0, authzFailed("ACP agents", err)
	}
	if failOpen {
		b.Report.AuthzFailOpen = true
	}
	reason := make(map[string]string, len(denied))
	for _, d := range denied {
		reason[d.GetName()] = reasonText(d)
	}
	visible := make([]*catalogv1.AcpAgent, 0, len(names))
	for _, a := range resp.GetAgents() {
		if allowed[a.GetName()] {
			visible = append(visible, a)
			continue
		}
		b.Report.Denied = append(b.Report.Denied, InvokeACPAgent+" agent "+a.GetName()+" ("+FirstNonEmpty(reason[a.GetName()], "acp_agent denied")+")")
	}
	return ACPToolDef(visible), version, nil
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
