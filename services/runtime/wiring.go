package runtime

import (
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetools"
	"slices"
)

// wire builds the runtime's parts from the configuration once, at start:
// the assembly pipeline, the tool implementations and the tool-call chain
// (runtimechain.Standard, the one chain every tool call runs through).
func (s *Server) wire() {
	c := &s.cfg
	s.loops.s = s
	s.agents = &agentBook{def: c.DefaultAgent, store: s.store, bootstrap: c.BootstrapAgent}
	tools := make([]runtimeassembly.ConfigTool, 0, len(c.Tools))
	for _, t := range c.Tools {
		tools = append(tools, runtimeassembly.ConfigTool{Name: t.Name, Group: t.Group, Use: t.Use})
	}
	s.assembly = runtimeassembly.NewBuilder(runtimeassembly.Settings{
		Tools: tools, AllowBash: c.AllowBash, ToolSearch: c.toolSearchEnabled(), ExemptServers: c.ToolSearch.ExemptServers,
		DeferredListMax: c.ToolSearch.DeferredListMax, AutoPromoteTopK: c.ToolSearch.AutoPromoteTopK,
		FailOpenListing: c.Authz.FailOpenListing, CacheEntries: c.CacheEntries, CacheBytes: c.CacheBytes,
		MaxDescriptionBytes: c.ToolBounds.MaxDescriptionBytes, MaxSchemaBytes: c.ToolBounds.MaxSchemaBytes,
		BootstrapAgent: c.BootstrapAgent,
		ViewImage:      c.Loop.visionModels(),
	}, runtimeassembly.Deps{
		Catalog: s.catalog, Authz: s.authz, Skills: s.skills, Store: s.store, Agents: s.agents, Log: s.log, Now: s.now,
		Metrics: runtimeassembly.Metrics{Assemblies: s.metrics.assemblies, Promotions: s.metrics.promotions, FailOpen: s.metrics.failOpen},
	})
	dispatcher := runtimetools.NewDispatcher(runtimetools.Settings{
		AllowBash: c.AllowBash, ToolCallTimeout: c.ToolCallTimeout, SearchLimit: c.ToolSearch.SearchLimit, MaxMessageBytes: s.env.MaxMessageBytes,
		FileMaxBytes: c.limits().Workspace.FileMaxBytes, ThreadQuotaBytes: c.limits().Workspace.ThreadQuotaBytes,
		Web: c.webSettings(), ReadPageChars: c.readPageChars(),
	}, runtimetools.Deps{Workspace: s.ws, Catalog: s.catalog, Skills: s.skills, Assembly: s.assembly, Now: s.now, Log: s.log, Promotions: s.metrics.promotions,
		Agents: &ownedAgents{store: s.store, now: s.now, reserved: s.agents.reserved}})
	s.chain = runtimechain.Standard(runtimechain.Deps{
		Views: s.assembly, Authorizer: s.authz, Workspace: s.chainWorkspace(), Results: s.ws, Tools: dispatcher,
		Budget: runtimechain.BudgetSettings{ExternalizeMinChars: c.ToolOutput.ExternalizeMinChars, PreviewHeadChars: c.ToolOutput.PreviewHeadChars,
			PreviewTailChars: c.ToolOutput.PreviewTailChars, ExemptTools: c.ToolOutput.ExemptTools},
		Arguments: c.argumentLimits(), Refusals: s.authz, Log: s.log,
	})
}

// chainWorkspace returns the chain's workspace: cross-replica locks when
// the store is shared (locks.go).
func (s *Server) chainWorkspace() chainWorkspace {
	w := chainWorkspace{Workspace: s.ws}
	if l, ok := s.store.(runtimestore.Locker); ok && s.shared {
		w.shared = l
	}
	return w
}

// readPageChars is the budget read_file's reads are cut near when read_file
// is exempt from externalisation (then the budget pages it); 0 otherwise.
func (c *Config) readPageChars() int {
	if slices.Contains(c.ToolOutput.ExemptTools, "read_file") {
		return max(c.ToolOutput.ExternalizeMinChars, 0)
	}
	return 0
}
