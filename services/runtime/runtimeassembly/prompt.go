package runtimeassembly

import (
	"fmt"
	"html"
	"regexp"
	"sort"
	"strings"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// EscapeText escapes &, < and > (quotes untouched), as the deferred-tools
// section does (docs/deerflow.md §2.6).
func EscapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// deferredSection renders <available-deferred-tools>: one escaped name per
// line, sorted; above max names, a bounded grouped form (servers with tool
// counts, the largest first, at most 40 lines) with a hint to search.
func deferredSection(b *Base, max int) string {
	if !b.HasDeferred() {
		return ""
	}
	var sb strings.Builder
	if len(b.DeferredNames) <= max {
		sb.WriteString("<available-deferred-tools>\n")
		for _, n := range b.DeferredNames {
			sb.WriteString(EscapeText(n))
			sb.WriteByte('\n')
		}
		sb.WriteString("</available-deferred-tools>\n")
		sb.WriteString("The tools above exist but are not loaded. To use one, call tool_search first (e.g. \"select:<name>\" or keywords); it becomes callable after that.")
		return sb.String()
	}
	counts := map[string]int{}
	for _, n := range b.DeferredNames {
		counts[b.Deferred[n].Server]++
	}
	servers := make([]string, 0, len(counts))
	for s := range counts {
		servers = append(servers, s)
	}
	sort.Slice(servers, func(i, j int) bool {
		if counts[servers[i]] != counts[servers[j]] {
			return counts[servers[i]] > counts[servers[j]]
		}
		return servers[i] < servers[j]
	})
	const maxLines = 40
	fmt.Fprintf(&sb, "<available-deferred-tools count=\"%d\" servers=\"%d\">\n", len(b.DeferredNames), len(servers))
	for i, srv := range servers {
		if i == maxLines {
			rest := 0
			for _, r := range servers[i:] {
				rest += counts[r]
			}
			fmt.Fprintf(&sb, "... %d more servers with %d tools\n", len(servers)-i, rest)
			break
		}
		fmt.Fprintf(&sb, "%s: %d tools\n", EscapeText(srv), counts[srv])
	}
	sb.WriteString("</available-deferred-tools>\n")
	sb.WriteString("Too many deferred tools to list by name. Call tool_search with keywords describing what you need (or \"select:<name>\" for a known name); matching tools become callable after that.")
	return sb.String()
}

// routingHints renders <mcp_routing_hints> for every authorized MCP tool
// with mode PREFER and keywords, priority desc then name asc
// (docs/deerflow.md §2.8), bounded to the first 30 tools so that a large
// routed server cannot flood the prompt.
func routingHints(tools []*Tool, deferred map[string]*Tool) string {
	var hs []*Tool
	for _, t := range tools {
		if t.Source == SourceMCP && t.Routing.GetMode() == catalogv1.RoutingMode_ROUTING_MODE_PREFER && len(nonBlank(t.Routing.GetKeywords())) > 0 {
			hs = append(hs, t)
		}
	}
	if len(hs) == 0 {
		return ""
	}
	sort.SliceStable(hs, func(i, j int) bool {
		if hs[i].Routing.GetPriority() != hs[j].Routing.GetPriority() {
			return hs[i].Routing.GetPriority() > hs[j].Routing.GetPriority()
		}
		return hs[i].Name < hs[j].Name
	})
	var sb strings.Builder
	sb.WriteString("<mcp_routing_hints>\n")
	const maxHints = 30
	for i, t := range hs {
		if i == maxHints {
			fmt.Fprintf(&sb, "(%d more tools have routing hints; tool_search finds them by keyword.)\n", len(hs)-i)
			break
		}
		kws := nonBlank(t.Routing.GetKeywords())
		for i := range kws {
			kws[i] = EscapeText(kws[i])
		}
		joined := kws[0]
		if len(kws) > 1 {
			joined = strings.Join(kws[:len(kws)-1], ", ") + " or " + kws[len(kws)-1]
		}
		fmt.Fprintf(&sb, "When the request mentions %s:\n", joined)
		if _, ok := deferred[t.Name]; ok {
			fmt.Fprintf(&sb, "  load %s with tool_search, then prefer it.\n", EscapeText(t.Name))
		} else {
			fmt.Fprintf(&sb, "  prefer %s.\n", EscapeText(t.Name))
		}
	}
	sb.WriteString("</mcp_routing_hints>")
	return sb.String()
}

// CategoryName is a skill category's folder name under /mnt/skills.
func CategoryName(c skillsv1.SkillCategory) string {
	switch c {
	case skillsv1.SkillCategory_SKILL_CATEGORY_PUBLIC:
		return "public"
	case skillsv1.SkillCategory_SKILL_CATEGORY_INTEGRATION:
		return "integration"
	case skillsv1.SkillCategory_SKILL_CATEGORY_CUSTOM:
		return "custom"
	}
	return "public"
}

// SkillMDPath is the virtual path of a skill's SKILL.md.
func SkillMDPath(sk *skillsv1.Skill) string {
	if p := sk.GetPath(); p != "" {
		return strings.TrimSuffix(p, "/") + "/SKILL.md"
	}
	return "/mnt/skills/" + CategoryName(sk.GetCategory()) + "/" + sk.GetName() + "/SKILL.md"
}

// skillsSection renders the deferred-discovery skills index
// (docs/deerflow.md §4.4).
func skillsSection(b *Base) string {
	if len(b.Skills) == 0 {
		return ""
	}
	names := make([]string, 0, len(b.Skills))
	for _, sk := range b.Skills {
		names = append(names, EscapeText(sk.GetName()))
	}
	sort.Strings(names)
	return "<skill_system>\nSkills are packaged instructions for specific tasks. To use one: call describe_skill to see what it does, then read its SKILL.md with read_file (at /mnt/skills/<category>/<name>/SKILL.md) and follow it. The user can also activate one with \"/<skill-name> task\".\n<skill_index>" +
		strings.Join(names, ", ") + "</skill_index>\n</skill_system>"
}

// promptSections returns the sections in prompt order: skills, slash
// activation, deferred tools, routing hints, subagents.
func (s *Builder) promptSections(b *Base, activation *runtimev1.PromptSection) []*runtimev1.PromptSection {
	var out []*runtimev1.PromptSection
	add := func(name, text string) {
		if text != "" {
			out = append(out, &runtimev1.PromptSection{Name: name, Text: text})
		}
	}
	add("skills", b.SkillsText)
	if activation != nil {
		out = append(out, activation)
	}
	add("deferred_tools", b.DeferredText)
	add("routing_hints", b.Hints)
	if b.Agent.GetSubagentsEnabled() {
		add("subagents", "<subagent_system>\nUse the task tool to delegate self-contained work to a subagent; it returns the subagent's result.\n</subagent_system>")
	}
	return out
}

// reservedSlash are slash words that never activate a skill (docs/deerflow.md §4.7).
var reservedSlash = map[string]bool{"bootstrap": true, "goal": true, "help": true, "memory": true, "models": true, "new": true, "status": true}

var slashRE = regexp.MustCompile(`^/([a-z0-9]+(?:-[a-z0-9]+)*)(?:\s+|$)`)

// ParseSlash parses `/skill-name task` (no leading whitespace; reserved
// names ignored) and returns the name and the left-trimmed task.
func ParseSlash(msg string) (name, task string, ok bool) {
	m := slashRE.FindStringSubmatchIndex(msg)
	if m == nil {
		return "", "", false
	}
	name = msg[m[2]:m[3]]
	if reservedSlash[name] {
		return "", "", false
	}
	return name, strings.TrimLeft(msg[m[1]:], " \t\r\n"), true
}

// blockedTags are framework and authority tags neutralised in remote tool
// results and model-visible untrusted text (docs/deerflow.md §6.2).
var blockedTags = []string{"system-reminder", "system", "memory", "skill_system", "skill_index", "available-deferred-tools",
	"mcp_routing_hints", "slash_skill_activation", "durable_context_data", "instruction", "instructions", "important",
	"override", "ignore", "prompt", "subagent_system", "current_uploads", "tool_call", "function_call", "assistant", "user"}

var blockedTagRE = regexp.MustCompile(`(?i)</?\s*(` + strings.Join(quoteAll(blockedTags), "|") + `)\b[^>]*>`)

func quoteAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

// Neutralise HTML-escapes blocked tags and replaces the user-input boundary
// markers with inert look-alikes.
func Neutralise(s string) string {
	s = blockedTagRE.ReplaceAllStringFunc(s, html.EscapeString)
	s = strings.ReplaceAll(s, "--- BEGIN USER INPUT ---", "[begin user input]")
	s = strings.ReplaceAll(s, "--- END USER INPUT ---", "[end user input]")
	return s
}
