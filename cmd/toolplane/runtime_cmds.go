package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

func init() {
	extraCommands = append(extraCommands, newThreadsCmd, newAgentsCmd)
}

// runtimeClient dials the suite and returns a RuntimeService client.
func runtimeClient(cf *clientFlags) (runtimev1.RuntimeServiceClient, func(), error) {
	cc, err := cf.dial()
	if err != nil {
		return nil, nil, err
	}
	return runtimev1.NewRuntimeServiceClient(cc), func() { cc.Close() }, nil
}

func printThreads(w io.Writer, ths []*runtimev1.Thread) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tAGENT\tPROMOTED\tSKILLS\tUPDATED")
	for _, t := range ths {
		var skills []string
		for _, s := range t.GetActiveSkills() {
			skills = append(skills, s.GetName())
		}
		agent := t.GetAgent()
		if agent == "" {
			agent = "default"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.GetThreadId(), agent, len(t.GetPromoted().GetNames()), strings.Join(skills, ","), t.GetUpdateTime().AsTime().Format("2006-01-02 15:04:05"))
	}
	tw.Flush()
}

// newThreadsCmd returns `toolplane threads create|list|get|delete|assemble|call`,
// a client of a running suite's RuntimeService. Threads belong to the
// credential's principal.
func newThreadsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "threads", Short: "Create, inspect and delete threads; assemble tools and execute tool calls"}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)

	var agent string
	var meta []string
	create := &cobra.Command{
		Use: "create", Short: "Create a thread owned by the caller", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			req := &runtimev1.CreateThreadRequest{Agent: agent, Metadata: map[string]string{}}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--meta %q: want key=value", kv)
				}
				req.Metadata[k] = v
			}
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.CreateThread(callCtx(c), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r.GetThread())
			}
			fmt.Fprintln(c.OutOrStdout(), r.GetThread().GetThreadId())
			return nil
		},
	}
	create.Flags().StringVar(&agent, "agent", "", "agent profile (default: the default agent)")
	create.Flags().StringArrayVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	cmd.AddCommand(create)

	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List your threads, newest first", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			var all []*runtimev1.Thread
			token := ""
			for {
				r, err := cl.ListThreads(callCtx(c), &runtimev1.ListThreadsRequest{PageSize: 200, PageToken: token})
				if err != nil {
					return err
				}
				all = append(all, r.GetThreads()...)
				if token = r.GetNextPageToken(); token == "" {
					break
				}
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), &runtimev1.ListThreadsResponse{Threads: all})
			}
			printThreads(c.OutOrStdout(), all)
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "get ID", Short: "Show a thread (promotions, active skills, artifacts, read files)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.GetThread(callCtx(c), &runtimev1.GetThreadRequest{ThreadId: a[0]})
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetThread())
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "delete ID", Short: "Delete a thread with its workspace", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			if _, err := cl.DeleteThread(callCtx(c), &runtimev1.DeleteThreadRequest{ThreadId: a[0]}); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "deleted", a[0])
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "assemble ID [USER_TEXT]", Short: "Assemble the tools of the thread's next model call", Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			req := &runtimev1.AssembleToolsRequest{ThreadId: a[0]}
			if len(a) == 2 {
				req.UserMessage = a[1]
			}
			r, err := cl.AssembleTools(callCtx(c), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			w := c.OutOrStdout()
			if r.GetSkipModel() {
				fmt.Fprintln(w, r.GetDirectAnswer())
				return nil
			}
			var bound []string
			for _, t := range r.GetTools() {
				bound = append(bound, t.GetName()+" ("+t.GetSource()+")")
			}
			fmt.Fprintf(w, "catalog hash:   %s\npolicy version: %d\nbound (%d):     %s\ndeferred:       %d tools\n",
				r.GetCatalogHash(), r.GetPolicyVersion(), len(bound), strings.Join(bound, ", "), len(r.GetDeferred()))
			if s := r.GetActivatedSkill(); s != nil {
				fmt.Fprintf(w, "activated:      %s\n", s.GetName())
			}
			rep := r.GetReport()
			for label, v := range map[string][]string{"denied": rep.GetDenied(), "skill filtered": rep.GetSkillFiltered(), "auto-promoted": rep.GetAutoPromoted(),
				"duplicates": rep.GetDroppedDuplicates(), "name mismatch": rep.GetNameMismatches(), "notes": rep.GetNotes()} {
				if len(v) > 0 {
					fmt.Fprintf(w, "%-15s %s\n", label+":", strings.Join(v, "; "))
				}
			}
			if rep.GetAuthzFailOpen() {
				fmt.Fprintln(w, "WARNING: authz was unreachable; the listing is fail-open")
			}
			for _, s := range r.GetPromptSections() {
				fmt.Fprintf(w, "\n[%s]\n%s\n", s.GetName(), s.GetText())
			}
			return nil
		},
	})
	var callID string
	callCmd := &cobra.Command{
		Use: "call ID TOOL [JSON_ARGS]", Short: "Execute one tool call through the tool-call chain", Args: cobra.RangeArgs(2, 3),
		RunE: func(c *cobra.Command, a []string) error {
			id := callID
			if id == "" {
				id = newCallID()
			}
			tc := &runtimev1.ToolCall{Id: id, Name: a[1]}
			if len(a) == 3 {
				var m map[string]any
				if err := json.Unmarshal([]byte(a[2]), &m); err != nil {
					// Sent raw: the chain answers malformed JSON with a BUSINESS error.
					tc.RawArguments = a[2]
				} else if tc.Arguments, err = structpb.NewStruct(m); err != nil {
					return fmt.Errorf("arguments: %v", err)
				}
			}
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ExecuteToolCall(callCtx(c), &runtimev1.ExecuteToolCallRequest{ThreadId: a[0], ToolCall: tc})
			if err != nil {
				return err
			}
			res := r.GetResult()
			if asJSON {
				return printJSON(c.OutOrStdout(), res)
			}
			w := c.OutOrStdout()
			fmt.Fprintf(w, "status: %s", strings.TrimPrefix(res.GetStatus().String(), "TOOL_CALL_STATUS_"))
			if res.GetErrorKind() != runtimev1.ErrorKind_ERROR_KIND_UNSPECIFIED {
				fmt.Fprintf(w, " (%s %s)", strings.TrimPrefix(res.GetErrorKind().String(), "ERROR_KIND_"), res.GetReasonCode())
			}
			fmt.Fprintln(w)
			if p := res.GetPromoted(); len(p.GetNames()) > 0 {
				fmt.Fprintf(w, "promoted: %s (hash %s)\n", strings.Join(p.GetNames(), ", "), p.GetCatalogHash())
			}
			for _, b := range res.GetContent() {
				if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
					fmt.Fprintln(w, b.GetText())
				} else {
					fmt.Fprintf(w, "[%s block]\n", strings.TrimPrefix(b.GetType().String(), "CONTENT_BLOCK_TYPE_"))
				}
			}
			if res.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR {
				return &exitError{code: 1, err: fmt.Errorf("tool call failed")}
			}
			return nil
		},
	}
	callCmd.Flags().StringVar(&callID, "call-id", "", "tool call id (default: a new id per invocation; repeating an id retries that call and returns its stored result)")
	cmd.AddCommand(callCmd)
	return cmd
}

// newAgentsCmd returns `toolplane agents list|get|put|delete`. put reads
// an Agent as JSON (protojson) from a file or "-" (stdin); put and delete
// need an admin credential.
func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "List, show, write and delete custom agents"}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List agents", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ListAgents(callCtx(c), &runtimev1.ListAgentsRequest{})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTOOL GROUPS\tSKILLS\tDEFERRAL\tDESCRIPTION")
			list := func(l *typev1.StringList) string {
				if l == nil {
					return "(all)"
				}
				if len(l.GetValues()) == 0 {
					return "(none)"
				}
				return strings.Join(l.GetValues(), ",")
			}
			for _, a := range r.GetAgents() {
				def := "(global)"
				if ts := a.GetToolSearch(); ts != nil {
					def = fmt.Sprintf("enabled=%v exempt=%s", ts.GetEnabled(), strings.Join(ts.GetExemptServers(), ","))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.GetName(), list(a.GetToolGroups()), list(a.GetSkills()), def, a.GetDescription())
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "get NAME", Short: "Show an agent as JSON", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.GetAgent(callCtx(c), &runtimev1.GetAgentRequest{Name: a[0]})
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetAgent())
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "put FILE", Short: "Create or replace an agent from JSON (a file, or - for stdin; admin)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			var data []byte
			var err error
			if a[0] == "-" {
				data, err = io.ReadAll(c.InOrStdin())
			} else {
				data, err = os.ReadFile(a[0])
			}
			if err != nil {
				return err
			}
			ag := &runtimev1.Agent{}
			if err := protojson.Unmarshal(data, ag); err != nil {
				return fmt.Errorf("%s: %v", a[0], err)
			}
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.UpsertAgent(callCtx(c), &runtimev1.UpsertAgentRequest{Agent: ag})
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), r.GetAgent())
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "delete NAME", Short: "Delete an agent (admin)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, done, err := runtimeClient(cf)
			if err != nil {
				return err
			}
			defer done()
			if _, err := cl.DeleteAgent(callCtx(c), &runtimev1.DeleteAgentRequest{Name: a[0]}); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "deleted", a[0])
			return nil
		},
	})
	return cmd
}

// newCallID returns a fresh tool call id for `threads call`: every
// invocation is a new call (ExecuteToolCall returns the stored result for a
// repeated id).
func newCallID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "cli-" + hex.EncodeToString(b[:])
}
