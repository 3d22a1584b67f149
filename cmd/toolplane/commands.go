package main

// Client and tool sub-commands defined in the other files of this package
// (runtime_cmds.go and mcp_cmd.go register theirs in their own init).
func init() {
	extraCommands = append(extraCommands,
		newServersCmd, newToolsCmd, // catalog (servers_cmds.go, tools_cmds.go)
		newPoliciesCmd, newDecisionsCmd, // authz (authz_cmds.go)
		newSkillsCmd,                // skills (skills_cmds.go)
		newThreadsCmd, newAgentsCmd, // runtime (runtime_cmds.go)
		newMCPCmd,  // MCP front door over stdio (mcp_cmd.go)
		newEvalCmd, // search evaluation (eval.go)
	)
}
