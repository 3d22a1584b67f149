package main

// Client and tool sub-commands defined in the other files of this package
// (runtime_cmds.go, mcp_cmd.go and config_cmds.go register theirs in their
// own init).
func init() {
	extraCommands = append(extraCommands,
		newServersCmd, newToolsCmd, // catalog (servers_cmds.go, tools_cmds.go)
		newPoliciesCmd, newDecisionsCmd, // authz (authz_cmds.go)
		newSkillsCmd, // skills (skills_cmds.go)
		newEvalCmd,   // search evaluation (eval.go)
	)
}
