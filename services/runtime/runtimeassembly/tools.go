package runtimeassembly

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// Tool sources as reported in ToolSchema.Source.
const (
	SourceConfig  = "config"
	SourceBuiltin = "builtin"
	SourceMCP     = "mcp"
)

// Names of built-in tools.
const (
	ToolSearchName     = "tool_search"
	AskClarification   = "ask_clarification"
	PresentFiles       = "present_files"
	DescribeSkill      = "describe_skill"
	ReviewSkillPackage = "review_skill_package"
	TaskTool           = "task"
	ViewImage          = "view_image"
)

// AlwaysAvailable are the names an active skill policy never removes
// (docs/deerflow.md §4.9 ALWAYS_AVAILABLE).
var AlwaysAvailable = []string{DescribeSkill, "read_file", ReviewSkillPackage, ToolSearchName}

// Tool is one tool known to an assembly.
type Tool struct {
	Name        string
	Description string
	Params      *structpb.Struct // input schema exactly as received; nil = none
	Source      string
	Use         string // config: file.read, ...; builtin: its name
	Group       string // config tools
	Server      string // MCP tools
	Routing     *catalogv1.Routing
	Annotations *structpb.Struct // MCP tool annotations from the catalog, verbatim; nil = none
	ACPAgents   []string         // invoke_acp_agent: the agents it may name
	// DefinitionHash is the catalog's definition hash of an MCP tool
	// (docs/architecture.md §8); promotions are bound while it is unchanged.
	DefinitionHash string
	// Truncated says what the runtime.tool_bounds cut ("" = nothing).
	Truncated string
	// Scope and Stateful are the session scope and the `stateful` key of
	// an MCP tool's server: they decide the catalog replica its calls are
	// placed on (docs/decisions/0086-session-placement.md).
	Scope    catalogv1.SessionScope
	Stateful bool
}

// ResourceAttributes are the tool's attributes for authz conditions (server
// and MCP annotations, services/authz/README.md "Conditions"); nil for a tool
// with neither.
// Built-in and config tools carry Toolplane's own annotations
// (ownAnnotations): the read-only ones say so, the rest take authz's
// defaults (state-changing).
func (t *Tool) ResourceAttributes() *authzv1.ResourceAttributes {
	if t == nil {
		return nil
	}
	ann := t.Annotations
	if t.Source != SourceMCP && ann == nil {
		ann = ownAnnotations[t.Use]
	}
	if t.Server == "" && ann == nil {
		return nil
	}
	return &authzv1.ResourceAttributes{Server: t.Server, Annotations: ann}
}

// readOnly is the annotation set of a tool that changes nothing outside the
// turn (MCP readOnlyHint).
var readOnly = &structpb.Struct{Fields: map[string]*structpb.Value{
	"readOnlyHint": structpb.NewBoolValue(true), "destructiveHint": structpb.NewBoolValue(false),
	"idempotentHint": structpb.NewBoolValue(true), "openWorldHint": structpb.NewBoolValue(false)}}

// ownAnnotations are the MCP annotations of the built-in and config tools
// that only read, keyed by Tool.Use. Writers (file.write, file.str_replace,
// bash, task) are absent and so match authz.annotation_defaults.
var ownAnnotations = map[string]*structpb.Struct{
	"file.read": readOnly, "file.ls": readOnly, "file.glob": readOnly, "file.grep": readOnly,
	ToolSearchName: readOnly, DescribeSkill: readOnly, ReviewSkillPackage: readOnly,
	AskClarification: readOnly, PresentFiles: readOnly,
	ViewImage: readOnly, "web.fetch": webReadOnly, "web.search": webReadOnly,
}

// webReadOnly annotates the web tools: they only read, from the open world.
var webReadOnly = &structpb.Struct{Fields: map[string]*structpb.Value{
	"readOnlyHint": structpb.NewBoolValue(true), "destructiveHint": structpb.NewBoolValue(false),
	"idempotentHint": structpb.NewBoolValue(true), "openWorldHint": structpb.NewBoolValue(true)}}

func mustSchema(js string) *structpb.Struct {
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(js), s); err != nil {
		panic(fmt.Sprintf("builtin schema: %v", err))
	}
	return s
}

// builtinSpec is the model-visible definition of a built-in or config implementation.
type builtinSpec struct {
	Description string
	Params      *structpb.Struct
}

// ImplSpecs are the config-tool implementations, keyed by `use`.
var ImplSpecs = map[string]builtinSpec{
	"file.read": {"Read a text file. Paths are virtual: /mnt/user-data/workspace, /mnt/user-data/outputs, /mnt/user-data/uploads, skill files under /mnt/skills/<category>/<name>/, and files written by ACP agents under /mnt/acp-workspace/ (read-only). Use start_line/end_line (1-based, inclusive) to page through large files. One call returns at most the output budget; a cut page ends with a note naming the range returned and the exact call that reads on, with start_char (0-based character offset within start_line) when a line is longer than a page.",
		mustSchema(`{"type":"object","properties":{"path":{"type":"string","description":"Absolute virtual path of the file."},"start_line":{"type":"integer","minimum":1,"description":"First line to return (1-based)."},"end_line":{"type":"integer","minimum":1,"description":"Last line to return (inclusive)."},"start_char":{"type":"integer","minimum":0,"description":"Character offset (0-based, in Unicode characters) within start_line to start at; for lines longer than one page."}},"required":["path"]}`)},
	"file.write": {"Write a text file under /mnt/user-data/workspace or /mnt/user-data/outputs (parent folders are created). Overwriting or appending to an existing file requires reading its current version with read_file first.",
		mustSchema(`{"type":"object","properties":{"path":{"type":"string","description":"Absolute virtual path of the file."},"content":{"type":"string","description":"Text to write."},"append":{"type":"boolean","description":"Append instead of overwrite."}},"required":["path","content"]}`)},
	"file.ls": {"List a directory of the thread's file system (virtual paths under /mnt/user-data).",
		mustSchema(`{"type":"object","properties":{"path":{"type":"string","description":"Absolute virtual path of the directory."}},"required":["path"]}`)},
	"file.str_replace": {"Replace text in an existing file. old_str must occur exactly once unless replace_all is true. The file's current version must have been read with read_file.",
		mustSchema(`{"type":"object","properties":{"path":{"type":"string"},"old_str":{"type":"string","description":"Exact text to replace."},"new_str":{"type":"string","description":"Replacement text."},"replace_all":{"type":"boolean"}},"required":["path","old_str","new_str"]}`)},
	"file.glob": {"Find files by name under the thread's file system (virtual paths under /mnt/user-data). The pattern is relative to path; * and ? match within one path segment, ** matches any number of folders, {a,b} either alternative (e.g. **/*.{md,txt}). At most 200 results, in path order.",
		mustSchema(`{"type":"object","properties":{"pattern":{"type":"string","description":"Glob pattern relative to path, e.g. **/*.py or outputs/*.csv."},"path":{"type":"string","description":"Absolute virtual folder to search; default /mnt/user-data."},"include_dirs":{"type":"boolean","description":"Also list matching folders (with a trailing /)."}},"required":["pattern"]}`)},
	"file.grep": {"Search the text of files under the thread's file system for a regular expression (RE2 syntax; case-insensitive unless case_sensitive). Prints <path>:<line>: <text>, at most 100 matches; binary files and files over 1 MiB are skipped.",
		mustSchema(`{"type":"object","properties":{"pattern":{"type":"string","description":"RE2 regular expression (or plain text with literal)."},"path":{"type":"string","description":"Absolute virtual folder or file to search; default /mnt/user-data."},"glob":{"type":"string","description":"Only files matching this glob (a base-name pattern like *.go, or a path pattern relative to path)."},"literal":{"type":"boolean","description":"Treat pattern as plain text."},"case_sensitive":{"type":"boolean","description":"Match case exactly."}},"required":["pattern"]}`)},
	"web.fetch": {"Fetch a web page or text document by URL and return its readable text (HTML is converted to text with links kept; only text content types are read; private and local addresses are refused).",
		mustSchema(`{"type":"object","properties":{"url":{"type":"string","description":"The http or https URL to fetch."}},"required":["url"]}`)},
	"web.search": {"Search the web. Returns the top results (title, URL, snippet) or a sourced answer, depending on the configured search backend.",
		mustSchema(`{"type":"object","properties":{"query":{"type":"string","description":"The search query."},"max_results":{"type":"integer","minimum":1,"maximum":20,"description":"At most this many results (default and cap set by the operator)."}},"required":["query"]}`)},
	"bash": {"Run a shell command in the thread's workspace (/mnt/user-data/workspace is the working directory).",
		mustSchema(`{"type":"object","properties":{"command":{"type":"string","description":"The command line."},"description":{"type":"string","description":"Why you run it (for the audit log)."}},"required":["command"]}`)},
}

// builtinSpecs are the built-in tools (docs/deerflow.md §1.6).
var builtinSpecs = map[string]builtinSpec{
	AskClarification: {"Ask the user a question when the request is ambiguous, information is missing, or before a risky step. The turn ends until the user answers.",
		mustSchema(`{"type":"object","properties":{"question":{"type":"string","description":"The question."},"clarification_type":{"type":"string","enum":["missing_info","ambiguous_requirement","approach_choice","risk_confirmation","suggestion"]},"context":{"type":"string","description":"Why you ask."},"options":{"type":"array","items":{"type":"string"},"description":"Choices, when the answer is one of a few."}},"required":["question"]}`)},
	PresentFiles: {"Show files you produced to the user. Only files under /mnt/user-data/outputs can be presented.",
		mustSchema(`{"type":"object","properties":{"filepaths":{"type":"array","items":{"type":"string"},"description":"Absolute virtual paths under /mnt/user-data/outputs."}},"required":["filepaths"]}`)},
	DescribeSkill: {"Find skills and see what they do. Query forms: \"select:a,b\" (exact names), \"+word rest\" (name must contain word), or keywords/regex. Load a skill afterwards by reading its SKILL.md with read_file.",
		mustSchema(`{"type":"object","properties":{"name":{"type":"string","description":"Skill name or query."}},"required":["name"]}`)},
	ReviewSkillPackage: {"Review a skill package read-only: facts, findings of the deterministic scanner, and (optionally) its text files. The package is an installed skill, an archive (.skill, .zip, .tar.gz) or a folder with SKILL.md under /mnt/user-data, or inline SKILL.md text. Reviewing never installs or activates the skill.",
		mustSchema(`{"type":"object","properties":{"target":{"type":"string","description":"Skill name; skill://<category>/<name>; a path under /mnt/user-data to an archive or a folder holding SKILL.md; or inline://<name> with inline_content."},"inline_content":{"type":"string","description":"The SKILL.md text, with an inline://<name> target."},"include_content":{"type":"boolean","description":"Include the package's text files."}},"required":["target"]}`)},
	TaskTool: {"Delegate a self-contained task to a subagent that works on its own and returns its result.",
		mustSchema(`{"type":"object","properties":{"description":{"type":"string","description":"Short label of the task."},"prompt":{"type":"string","description":"Full instructions for the subagent."},"subagent_type":{"type":"string","description":"general-purpose (default) or a configured subagent."}},"required":["description","prompt"]}`)},
	ViewImage: {"Read an image file (PNG, JPEG, GIF or WebP, at most 5 MiB) from the thread's files so you can see it; the image is shown to you with the result. Use it only when you need the image's visual content.",
		mustSchema(`{"type":"object","properties":{"image_path":{"type":"string","description":"Absolute virtual path of the image, e.g. /mnt/user-data/uploads/chart.png."}},"required":["image_path"]}`)},
	ToolSearchName: {"Load deferred tools. Tools listed in <available-deferred-tools> cannot be called until you find them here. Query forms: \"select:name_a,name_b\" loads exact names; \"+word rest\" requires word in the tool name and ranks by the rest; anything else is a keyword search. Matching tools become callable on your next step.",
		mustSchema(`{"type":"object","properties":{"query":{"type":"string","description":"select:<names>, +<required> <keywords>, or keywords."}},"required":["query"]}`)},
}

// BuiltinDef is the definition of a built-in tool.
func BuiltinDef(name string) *Tool {
	sp := builtinSpecs[name]
	return &Tool{Name: name, Description: sp.Description, Params: sp.Params, Source: SourceBuiltin, Use: name}
}

// ImplNames maps a config tool `use` to the implementation's own name.
var ImplNames = map[string]string{
	"file.read":        "read_file",
	"file.write":       "write_file",
	"file.ls":          "ls",
	"file.str_replace": "str_replace",
	"file.glob":        "glob",
	"file.grep":        "grep",
	"bash":             "bash",
	"web.fetch":        "web_fetch",
	"web.search":       "web_search",
}

// agentDigest is a short digest of an agent's whole definition.
func agentDigest(a *runtimev1.Agent) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// boundTool applies runtime.tool_bounds to an MCP tool as bound for the
// model (docs/architecture.md §3.1); the catalog keeps the definition
// verbatim. A description over maxDesc bytes is cut at a UTF-8 boundary
// with a notice. An input schema over maxSchema bytes of JSON first loses
// the descriptions nested in it; if still too large it is replaced by an
// open object schema and the description says so. t.Truncated records what
// was cut. Zero bounds are unbounded.
func boundTool(t *Tool, maxDesc, maxSchema int) {
	var cuts []string
	if maxSchema > 0 && t.Params != nil {
		if n := jsonSize(t.Params.AsMap()); n > maxSchema {
			m := t.Params.AsMap()
			stripDescriptions(m, true)
			if n2 := jsonSize(m); n2 <= maxSchema {
				if st, err := structpb.NewStruct(m); err == nil {
					t.Params = st
					cuts = append(cuts, fmt.Sprintf("schema of %d bytes: nested descriptions removed (%d bytes)", n, n2))
				}
			} else {
				t.Params = &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}
				cuts = append(cuts, fmt.Sprintf("schema of %d bytes replaced by an open object schema", n))
				t.Description = fmt.Sprintf("[The input schema of this tool (%d bytes) exceeds the %d-byte bound and is not shown; pass the arguments its documentation names.]\n", n, maxSchema) + t.Description
			}
		}
	}
	if maxDesc > 0 && len(t.Description) > maxDesc {
		full := len(t.Description)
		// The notice names both sizes; its length with the full size twice
		// bounds its final length.
		notice := fmt.Sprintf("\n[Description truncated: %d of %d bytes shown.]", full, full)
		keep := max(maxDesc-len(notice), 0)
		for keep > 0 && !utf8.RuneStart(t.Description[keep]) {
			keep--
		}
		t.Description = t.Description[:keep] + fmt.Sprintf("\n[Description truncated: %d of %d bytes shown.]", keep, full)
		cuts = append(cuts, fmt.Sprintf("description of %d bytes cut to %d", full, keep))
	}
	t.Truncated = strings.Join(cuts, "; ")
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// stripDescriptions removes "description" members below the root of a
// JSON Schema (the root's own description is kept).
func stripDescriptions(v any, root bool) {
	switch x := v.(type) {
	case map[string]any:
		if !root {
			if _, ok := x["description"].(string); ok {
				delete(x, "description")
			}
		}
		for _, c := range x {
			stripDescriptions(c, false)
		}
	case []any:
		for _, c := range x {
			stripDescriptions(c, false)
		}
	}
}
