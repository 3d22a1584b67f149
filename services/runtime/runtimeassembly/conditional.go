package runtimeassembly

import (
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// Names of the conditional built-ins of docs/deerflow.md §1.6 bound here.
const (
	// ListUploadedFiles lists the thread's uploads (lead threads only).
	ListUploadedFiles = "list_uploaded_files"
	// SkillManage changes the user's custom skills (skills.evolution.enabled).
	SkillManage = "skill_manage"
	// UpdateAgent changes the thread's own agent (an agent the caller owns).
	UpdateAgent = "update_agent"
	// SetupAgent creates an agent owned by the caller (bootstrap agent only).
	SetupAgent = "setup_agent"
)

func init() {
	builtinSpecs[ListUploadedFiles] = builtinSpec{"List the files the user uploaded to this thread (under /mnt/user-data/uploads): path, size, modification time and MIME type; with include_outline, the first Markdown headings of text files. Read them with read_file.",
		mustSchema(`{"type":"object","properties":{"include_outline":{"type":"boolean","description":"Also list up to 20 Markdown headings of each text file."},"max_results":{"type":"integer","minimum":1,"maximum":1000,"description":"Most files to list (default 100)."}}}`)}
	builtinSpecs[SkillManage] = builtinSpec{"Create and improve your user's custom skills. Actions: create (content = the full SKILL.md, whose frontmatter name must equal name), edit (replace SKILL.md with content), patch (replace find with replace in path, default SKILL.md; the text must occur expected_count times when given, else at least once and the first is replaced), write_file / remove_file (a support file under references/, templates/, scripts/ or assets/), delete. Every change is validated and scanned; a change with a critical finding is refused. Public and integration skills are read-only.",
		mustSchema(`{"type":"object","properties":{"action":{"type":"string","enum":["create","edit","patch","write_file","remove_file","delete"]},"name":{"type":"string","description":"Skill name (lowercase letters, digits, hyphens)."},"content":{"type":"string","description":"SKILL.md (create, edit) or the file's content (write_file)."},"path":{"type":"string","description":"File relative to the skill folder, e.g. scripts/run.sh (write_file, remove_file, patch)."},"find":{"type":"string","description":"Exact text to replace (patch)."},"replace":{"type":"string","description":"Replacement text (patch)."},"expected_count":{"type":"integer","minimum":1,"description":"Occurrences of find required and replaced (patch)."}},"required":["action","name"]}`)}
	builtinSpecs[UpdateAgent] = builtinSpec{"Change this thread's own custom agent for the next turns: its soul (system prompt), description, skills, tool groups or model. Give only what changes; an empty list means none.",
		mustSchema(`{"type":"object","properties":{"soul":{"type":"string","description":"The agent's system prompt (its SOUL)."},"description":{"type":"string"},"skills":{"type":"array","items":{"type":"string"},"description":"Skills the agent may use."},"tool_groups":{"type":"array","items":{"type":"string"},"description":"Config tool groups the agent gets."},"model":{"type":"string","description":"Model name."}}}`)}
	builtinSpecs[SetupAgent] = builtinSpec{"Create the custom agent the user has described with you: a new agent owned by the user, used by threads created with its name. The name must not exist yet.",
		mustSchema(`{"type":"object","properties":{"name":{"type":"string","description":"Agent name: 1..64 of [a-z0-9-]."},"soul":{"type":"string","description":"The agent's system prompt (its SOUL)."},"description":{"type":"string","description":"One line on what the agent does."},"skills":{"type":"array","items":{"type":"string"}},"tool_groups":{"type":"array","items":{"type":"string"}},"model":{"type":"string"}},"required":["name","soul","description"]}`)}
	ownAnnotations[ListUploadedFiles] = readOnly
}

// OwnedBy reports whether agent a is owned by principal p (same tenant and
// subject; docs/decisions/0152-owned-agents.md). A shared agent (no owner)
// is owned by nobody.
func OwnedBy(a *runtimev1.Agent, p *typev1.Principal) bool {
	o := a.GetOwner()
	return o != nil && p != nil && o.GetSubject() != "" && o.GetSubject() == p.GetSubject() && o.GetTenant() == auth.TenantOf(p)
}

// conditionalBuiltins are the built-ins bound under conditions, in
// DeerFlow's order (docs/deerflow.md §1.2 step 6): list_uploaded_files for
// lead threads, skill_manage when skill evolution is on. lateBuiltins come
// after every source (§1.3 step 4 extra tools): update_agent for a thread
// of an agent the principal owns, setup_agent for the bootstrap agent.
func (s *Builder) conditionalBuiltins(th *runtimestore.Thread, evolution bool) []string {
	var out []string
	if th.Child == nil {
		out = append(out, ListUploadedFiles)
	}
	if evolution {
		out = append(out, SkillManage)
	}
	return out
}

func (s *Builder) lateBuiltins(th *runtimestore.Thread, agent *runtimev1.Agent, p *typev1.Principal) []*Tool {
	if th.Child != nil {
		return nil
	}
	switch {
	case s.cfg.BootstrapAgent != "" && agent.GetName() == s.cfg.BootstrapAgent:
		return []*Tool{BuiltinDef(SetupAgent)}
	case OwnedBy(agent, p):
		return []*Tool{BuiltinDef(UpdateAgent)}
	}
	return nil
}
