package main

import (
	"fmt"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/services/catalog/catalogacp"
)

// importACPAgents maps DeerFlow's top-level `acp_agents` (name → command,
// args, env, description, model, auto_approve_permissions) to
// catalog.acp_agents, the same shape
// (docs/decisions/0150-where-acp-and-workspace-servers-run.md). `$VAR`
// references are kept as written: the catalog resolves them from its host
// at start. An entry that does not validate is dropped with its reason.
func (r *importResult) importACPAgents(n *yaml.Node) {
	fields := pairs(n)
	if fields == nil {
		if scalar(n) != "" || (deref(n) != nil && deref(n).Kind != yaml.ScalarNode) {
			r.drop("acp_agents", "not a mapping")
		}
		return
	}
	known := map[string]bool{"command": true, "args": true, "env": true, "description": true, "model": true, "auto_approve_permissions": true}
	for _, kv := range fields {
		p := "acp_agents." + kv.key
		entry := pairs(kv.val)
		if entry == nil {
			r.drop(p, "not a mapping")
			continue
		}
		var extra []string
		for _, f := range entry {
			if !known[f.key] {
				extra = append(extra, f.key)
			}
		}
		var a catalogacp.Agent
		if err := kv.val.Decode(&a); err != nil {
			r.drop(p, "%v", err)
			continue
		}
		if err := catalogacp.ValidateAgents("acp_agents", map[string]catalogacp.Agent{kv.key: a}); err != nil {
			r.drop(p, "%v", err)
			continue
		}
		if r.Config.Catalog.ACPAgents == nil {
			r.Config.Catalog.ACPAgents = map[string]catalogacp.Agent{}
		}
		r.Config.Catalog.ACPAgents[kv.key] = a
		sort.Strings(extra)
		for _, k := range extra {
			r.drop(fmt.Sprintf("%s.%s", p, k), "not a key of an ACP agent (command, args, env, description, model, auto_approve_permissions)")
		}
	}
}
