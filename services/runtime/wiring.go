package runtime

import (
	"context"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
)

// wire builds the runtime's parts from the configuration once, at start:
// the assembly pipeline, the tool implementations and the tool-call chain
// (runtimechain.Standard, the one chain every tool call runs through).
func (s *Server) wire() {
	c := &s.cfg
	tools := make([]runtimeassembly.ConfigTool, 0, len(c.Tools))
	for _, t := range c.Tools {
		tools = append(tools, runtimeassembly.ConfigTool{Name: t.Name, Group: t.Group, Use: t.Use})
	}
	s.assembly = runtimeassembly.NewBuilder(runtimeassembly.Settings{
		Tools: tools, AllowBash: c.AllowBash, ToolSearch: c.toolSearchEnabled(), ExemptServers: c.ToolSearch.ExemptServers,
		DeferredListMax: c.ToolSearch.DeferredListMax, AutoPromoteTopK: c.ToolSearch.AutoPromoteTopK,
		FailOpenListing: c.Authz.FailOpenListing, CacheEntries: c.CacheEntries,
	}, runtimeassembly.Deps{
		Catalog: s.catalog, Authz: s.authz, Skills: s.skills, Store: s.store, Agents: agentResolver{s}, Log: s.log, Now: s.now,
		Metrics: runtimeassembly.Metrics{Assemblies: s.metrics.assemblies, Promotions: s.metrics.promotions, FailOpen: s.metrics.failOpen},
	})
	dispatcher := runtimetools.NewDispatcher(runtimetools.Settings{
		AllowBash: c.AllowBash, ToolCallTimeout: c.ToolCallTimeout, SearchLimit: c.ToolSearch.SearchLimit, MaxMessageBytes: s.env.MaxMessageBytes,
	}, runtimetools.Deps{Workspace: s.ws, Catalog: s.catalog, Skills: s.skills, Assembly: s.assembly, Now: s.now, Log: s.log, Promotions: s.metrics.promotions})
	s.chain = runtimechain.Standard(runtimechain.Deps{
		Views: s.assembly, Authorizer: s.authz, Workspace: s.ws, Results: s.ws, Tools: dispatcher,
		Budget: runtimechain.BudgetSettings{ExternalizeMinChars: c.ToolOutput.ExternalizeMinChars, PreviewHeadChars: c.ToolOutput.PreviewHeadChars,
			PreviewTailChars: c.ToolOutput.PreviewTailChars, ExemptTools: c.ToolOutput.ExemptTools},
	})
}

// agentResolver gives the assembly the runtime's agent resolution
// (agents.go), whose errors are already status errors.
type agentResolver struct{ s *Server }

// ThreadAgent implements runtimeassembly.AgentResolver.
func (a agentResolver) ThreadAgent(ctx context.Context, th *runtimestore.Thread) (*runtimev1.Agent, error) {
	return a.s.threadAgent(ctx, th)
}
