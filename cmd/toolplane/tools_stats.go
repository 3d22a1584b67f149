package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/tokens"
	"github.com/toolplane/toolplane/services/runtime/runtimeschema"
)

// toolSearchToolName is the built-in tool that loads deferred tools
// (docs/deerflow.md §2.4).
const toolSearchToolName = "tool_search"

// deferredSectionName is the prompt section listing the deferred tool names
// (<available-deferred-tools>, docs/deerflow.md §2.6).
const deferredSectionName = "deferred_tools"

// toolStats is what `toolplane tools stats` measures (docs/architecture.md §3.1): the
// tool-related prompt of a thread's first turn against binding every tool.
type toolStats struct {
	// Agent is the agent profile of the measured thread ("" = default).
	Agent string `json:"agent"`
	// BoundTools is how many schemas AssembleTools binds at the first turn,
	// tool_search included.
	BoundTools int `json:"bound_tools"`
	// DeferredTools is how many tool names the deferred-tools section lists
	// (AssembleToolsResponse.deferred).
	DeferredTools int `json:"deferred_tools"`
	// CatalogTools is how many available catalog tools ListTools returns.
	CatalogTools int `json:"catalog_tools"`
	// AllSchemas is how many schemas binding every tool means: the bound
	// config and built-in tools (tool_search excluded) plus every catalog tool.
	AllSchemas int `json:"all_schemas"`
	// Counts holds one entry per encoding, in the order asked.
	Counts []encodingCounts `json:"counts"`
}

// encodingCounts are the token counts of one encoding.
type encodingCounts struct {
	// Encoding is the tiktoken encoding (o200k_base, cl100k_base).
	Encoding string `json:"encoding"`
	// BoundSchemas counts the bound schemas other than tool_search, as one
	// JSON array in OpenAI function format.
	BoundSchemas int `json:"bound_schemas"`
	// ToolSearchSchema counts tool_search's own schema (0 when not bound).
	ToolSearchSchema int `json:"tool_search_schema"`
	// DeferredSection counts the deferred-tools prompt section.
	DeferredSection int `json:"deferred_section"`
	// FirstTurn = BoundSchemas + ToolSearchSchema + DeferredSection.
	FirstTurn int `json:"first_turn"`
	// AllTools counts every schema bound (one JSON array, OpenAI format).
	AllTools int `json:"all_tools"`
	// ReductionPct is 100 * (1 - FirstTurn/AllTools).
	ReductionPct float64 `json:"reduction_pct"`
}

// newToolsStatsCmd returns `toolplane tools stats`: against a running suite
// it creates a thread (for --agent), calls AssembleTools with an empty user
// message (the first turn), lists every available catalog tool, deletes the
// thread, and prints the tool-related prompt tokens of the first turn (bound
// schemas + tool_search + the deferred-names section) against binding every
// tool, with the reduction in percent. Tokens are counted offline with
// tiktoken (internal/tokens). The caller needs a credential that may create
// threads and list catalog tools (service or admin; anyone with auth off).
func newToolsStatsCmd() *cobra.Command {
	var agent string
	var encodings []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Tool-related prompt tokens at a thread's first turn vs binding every catalog tool",
		Args:  usageArgs(cobra.NoArgs),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "agent profile of the measured thread (default: the default agent)")
	cmd.Flags().StringSliceVar(&encodings, "encoding", []string{tokens.O200kBase, tokens.Cl100kBase}, "tiktoken encodings: o200k_base, cl100k_base")
	addOutputFlags(cmd.Flags(), &asJSON)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		counters := make([]*tokens.Counter, 0, len(encodings))
		for _, e := range encodings {
			ct, err := tokens.New(strings.TrimSpace(e))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--encoding: %w", err)}
			}
			counters = append(counters, ct)
		}
		if len(counters) == 0 {
			return &exitError{code: 2, err: fmt.Errorf("--encoding: at least one encoding")}
		}
		cc, err := cf.dial()
		if err != nil {
			return err
		}
		defer cc.Close()
		st, err := measureToolStats(callCtx(c), cc, agent, counters)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(c.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		printToolStats(c.OutOrStdout(), st)
		return nil
	}
	return cmd
}

// measureToolStats does the measurement over one connection. The thread it
// creates is deleted before it returns, also on error.
func measureToolStats(ctx context.Context, cc grpc.ClientConnInterface, agent string, counters []*tokens.Counter) (st *toolStats, err error) {
	rt := runtimev1.NewRuntimeServiceClient(cc)
	th, err := rt.CreateThread(ctx, &runtimev1.CreateThreadRequest{Agent: agent, Metadata: map[string]string{"created_by": "toolplane tools stats"}})
	if err != nil {
		return nil, fmt.Errorf("create thread: %w", err)
	}
	id := th.GetThread().GetThreadId()
	defer func() {
		// A fresh context: the thread goes even when ctx was cancelled.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, derr := rt.DeleteThread(dctx, &runtimev1.DeleteThreadRequest{ThreadId: id}); derr != nil && err == nil {
			err = fmt.Errorf("delete thread %s: %w", id, derr)
		}
	}()
	asm, err := rt.AssembleTools(ctx, &runtimev1.AssembleToolsRequest{ThreadId: id})
	if err != nil {
		return nil, fmt.Errorf("assemble tools: %w", err)
	}

	// The first turn: bound schemas (tool_search apart) and the deferred section.
	var bound []any // schemas other than tool_search, OpenAI format
	var local []any // config and built-in schemas other than tool_search
	var toolSearch any
	for _, t := range asm.GetTools() {
		s := t.GetOpenai().AsMap()
		if t.GetName() == toolSearchToolName && t.GetSource() == "builtin" {
			toolSearch = s
			continue
		}
		bound = append(bound, s)
		if t.GetSource() == "config" || t.GetSource() == "builtin" {
			local = append(local, s)
		}
	}
	var section []string
	for _, p := range asm.GetPromptSections() {
		if p.GetName() == deferredSectionName {
			section = append(section, p.GetText())
		}
	}

	// Every tool bound: the same config and built-in tools plus every
	// available catalog tool (no tool_search, no deferred section).
	all := local
	cat := catalogv1.NewCatalogServiceClient(cc)
	catalogTools := 0
	for token := ""; ; {
		r, err := cat.ListTools(ctx, &catalogv1.ListToolsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list catalog tools: %w", err)
		}
		for _, t := range r.GetTools() {
			if !t.GetAvailable() {
				continue
			}
			// In the form assembly binds it (openai_chat, normalised for
			// the provider; docs/architecture.md §3.1).
			var in any
			if t.GetInputSchema() != nil {
				in = t.GetInputSchema().AsMap()
			}
			b, err := runtimeschema.Normalize(runtimeschema.OpenAIChat, runtimeschema.Tool{Name: t.GetName(), Description: t.GetDescription(), InputSchema: in})
			if err != nil {
				continue // left out of every binding
			}
			all = append(all, b.Render())
			catalogTools++
		}
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}

	st = &toolStats{Agent: agent, BoundTools: len(asm.GetTools()), DeferredTools: len(asm.GetDeferred()), CatalogTools: catalogTools, AllSchemas: len(all)}
	boundJSON, err := jsonText(bound)
	if err != nil {
		return nil, err
	}
	allJSON, err := jsonText(all)
	if err != nil {
		return nil, err
	}
	tsJSON := ""
	if toolSearch != nil {
		if tsJSON, err = jsonText(toolSearch); err != nil {
			return nil, err
		}
	}
	sectionText := strings.Join(section, "\n")
	for _, ct := range counters {
		ec := encodingCounts{Encoding: ct.Name()}
		for _, x := range []struct {
			dst  *int
			text string
		}{{&ec.BoundSchemas, boundJSON}, {&ec.ToolSearchSchema, tsJSON}, {&ec.DeferredSection, sectionText}, {&ec.AllTools, allJSON}} {
			if *x.dst, err = ct.Count(x.text); err != nil {
				return nil, err
			}
		}
		ec.FirstTurn = ec.BoundSchemas + ec.ToolSearchSchema + ec.DeferredSection
		if ec.AllTools > 0 {
			ec.ReductionPct = 100 * (1 - float64(ec.FirstTurn)/float64(ec.AllTools))
		}
		st.Counts = append(st.Counts, ec)
	}
	return st, nil
}

// jsonText is compact JSON with sorted keys (encoding/json), the form in
// which tool schemas are counted. An empty list is "" (nothing bound).
func jsonText(v any) (string, error) {
	if l, ok := v.([]any); ok && len(l) == 0 {
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode tool schemas: %w", err)
	}
	return string(b), nil
}

// printToolStats prints the figures as a table, one column per encoding.
func printToolStats(w io.Writer, st *toolStats) {
	agent := st.Agent
	if agent == "" {
		agent = "default"
	}
	fmt.Fprintf(w, "Tool-related prompt tokens at a thread's first turn (agent %s, %s catalog tools)\n\n", agent, thousands(st.CatalogTools))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(label string, f func(encodingCounts) string) {
		cells := []string{label}
		for _, ec := range st.Counts {
			cells = append(cells, fmt.Sprintf("%12s", f(ec)))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("", func(ec encodingCounts) string { return ec.Encoding })
	row("first turn", func(ec encodingCounts) string { return thousands(ec.FirstTurn) })
	row(fmt.Sprintf("  bound schemas (%d, tool_search apart)", st.BoundTools-boolInt(st.Counts[0].ToolSearchSchema > 0)),
		func(ec encodingCounts) string { return thousands(ec.BoundSchemas) })
	row("  tool_search schema", func(ec encodingCounts) string { return thousands(ec.ToolSearchSchema) })
	row(fmt.Sprintf("  deferred-tools section (%s names)", thousands(st.DeferredTools)), func(ec encodingCounts) string { return thousands(ec.DeferredSection) })
	row(fmt.Sprintf("every tool bound (%s schemas)", thousands(st.AllSchemas)), func(ec encodingCounts) string { return thousands(ec.AllTools) })
	row("reduction", func(ec encodingCounts) string { return fmt.Sprintf("%.2f%%", ec.ReductionPct) })
	tw.Flush()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// thousands formats n with comma separators (12,345).
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
