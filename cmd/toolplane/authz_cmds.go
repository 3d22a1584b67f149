package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

var cliResources = map[string]authzv1.ResourceType{
	authzcasbin.ResourceTool:      authzv1.ResourceType_RESOURCE_TYPE_TOOL,
	authzcasbin.ResourceSkill:     authzv1.ResourceType_RESOURCE_TYPE_SKILL,
	authzcasbin.ResourceModel:     authzv1.ResourceType_RESOURCE_TYPE_MODEL,
	authzcasbin.ResourceMCPServer: authzv1.ResourceType_RESOURCE_TYPE_MCP_SERVER,
	authzcasbin.ResourceACPAgent:  authzv1.ResourceType_RESOURCE_TYPE_ACP_AGENT,
	authzcasbin.ResourceResource:  authzv1.ResourceType_RESOURCE_TYPE_RESOURCE,
	authzcasbin.ResourcePrompt:    authzv1.ResourceType_RESOURCE_TYPE_PROMPT,
}

// cliResourceList names the resource types the CLI accepts, in the order of
// authzcasbin.ResourceTypes (for help and error texts).
var cliResourceList = strings.Join(authzcasbin.ResourceTypes, ", ")

var cliActions = map[string]authzv1.Action{
	authzcasbin.ActionCall: authzv1.Action_ACTION_CALL,
	authzcasbin.ActionList: authzv1.Action_ACTION_LIST,
	authzcasbin.ActionUse:  authzv1.Action_ACTION_USE,
}

// policyLine renders an API policy line in policy-file form.
func policyLine(p *authzv1.Policy) string {
	r := authzcasbin.Rule{
		Subject: p.GetRole(), Tenant: p.GetTenant(), Target: p.GetTarget(),
		Resource: "?", Action: "?", Effect: strings.ToLower(strings.TrimPrefix(p.GetEffect().String(), "POLICY_EFFECT_")),
	}
	for k, v := range cliResources {
		if v == p.GetResourceType() {
			r.Resource = k
		}
	}
	for k, v := range cliActions {
		if v == p.GetAction() {
			r.Action = k
		}
	}
	var conds []string
	for _, c := range p.GetConditions() {
		if e := c.GetExpression(); e != "" {
			conds = append(conds, e)
		} else {
			conds = append(conds, c.String())
		}
	}
	r.Condition = strings.Join(conds, " && ")
	return r.String()
}

// parseCLILines parses policy-file lines given on the command line (one per
// argument, or several separated by newlines) into API lines and links. A
// "*" resource type or action expands into one line per value.
func parseCLILines(args []string) ([]*authzv1.Policy, []*authzv1.RoleLink, error) {
	rules, links, err := authzcasbin.ParsePolicyText(strings.Join(args, "\n"), authzcasbin.SourceAPI)
	if err != nil {
		return nil, nil, err
	}
	var ps []*authzv1.Policy
	for _, r := range rules {
		rt, ok := cliResources[r.Resource]
		if !ok {
			// A type the parser knows but the CLI cannot send: refuse it
			// here rather than send RESOURCE_TYPE_UNSPECIFIED.
			return nil, nil, fmt.Errorf("resource type %q: this CLI cannot send it (want %s)", r.Resource, cliResourceList)
		}
		act, ok := cliActions[r.Action]
		if !ok {
			return nil, nil, fmt.Errorf("action %q: this CLI cannot send it (want call, list or use)", r.Action)
		}
		p := &authzv1.Policy{Role: r.Subject, Tenant: r.Tenant, ResourceType: rt, Target: r.Target,
			Action: act, Effect: authzv1.PolicyEffect_POLICY_EFFECT_ALLOW}
		if r.Effect == authzcasbin.EffectDeny {
			p.Effect = authzv1.PolicyEffect_POLICY_EFFECT_DENY
		}
		if r.Condition != "" {
			p.Conditions = []*authzv1.Condition{{Check: &authzv1.Condition_Expression{Expression: r.Condition}}}
		}
		ps = append(ps, p)
	}
	var ls []*authzv1.RoleLink
	for _, l := range links {
		ls = append(ls, &authzv1.RoleLink{Member: l.Member, Role: l.Role, Tenant: l.Tenant})
	}
	return ps, ls, nil
}

func readLinesArg(args []string, file string) ([]string, error) {
	if file == "" {
		return args, nil
	}
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	return append(args, string(data)), nil
}

// newPoliciesCmd returns `toolplane policies list|add|remove`, a client of a
// running suite's AuthzService (ListPolicies, AddPolicies, RemovePolicies;
// admin credential). Lines use the policy-file form:
//
//	p, <role>, <tenant|*>, <tool|skill|model|mcp_server|resource|prompt|acp_agent|*>, <target>, <call|list|use|*>, <allow|deny>[, <condition>]
//	g, <member>, <role>, <tenant|*>
func newPoliciesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policies", Short: "List, add and remove authorization policy lines and role links",
		Long: "List, add and remove authorization policy lines and role links. Lines use the policy-file form:\n\n" +
			"  p, <role>, <tenant|*>, <resource type|*>, <target>, <call|list|use|*>, <allow|deny>[, <condition>]\n" +
			"  g, <member>, <role>, <tenant|*>\n\nResource types: " + cliResourceList + "."}
	cf := addClientFlags(cmd)
	var asJSON bool
	addOutputFlags(cmd.PersistentFlags(), &asJSON)
	client := func() (authzv1.AuthzServiceClient, func(), error) {
		cc, err := cf.dial()
		if err != nil {
			return nil, nil, err
		}
		return authzv1.NewAuthzServiceClient(cc), func() { cc.Close() }, nil
	}

	var tenant, role string
	list := &cobra.Command{
		Use: "list", Short: "List the policy in force (id, source, line)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.ListPolicies(callCtx(c), &authzv1.ListPoliciesRequest{Tenant: tenant, Role: role})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "# policy_version %d\n", r.GetPolicyVersion())
			fmt.Fprintln(tw, "ID\tSOURCE\tLINE")
			for _, p := range r.GetPolicies() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.GetId(), strings.ToLower(strings.TrimPrefix(p.GetSource().String(), "POLICY_SOURCE_")), policyLine(p))
			}
			for _, l := range r.GetRoleLinks() {
				fmt.Fprintf(tw, "-\t%s\tg, %s, %s, %s\n", strings.ToLower(strings.TrimPrefix(l.GetSource().String(), "POLICY_SOURCE_")), l.GetMember(), l.GetRole(), l.GetTenant())
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&tenant, "tenant", "", "only lines and links of this tenant")
	list.Flags().StringVar(&role, "role", "", "only lines of this role and links naming it")

	var addFile string
	add := &cobra.Command{
		Use:   "add [LINE]...",
		Short: "Add lines and links atomically (e.g. 'p, ops, acme, tool, k8s_*, call, allow')",
		RunE: func(c *cobra.Command, args []string) error {
			lines, err := readLinesArg(args, addFile)
			if err != nil {
				return err
			}
			ps, ls, err := parseCLILines(lines)
			if err != nil {
				return err
			}
			if len(ps)+len(ls) == 0 {
				return fmt.Errorf("nothing to add: give lines as arguments or --file")
			}
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.AddPolicies(callCtx(c), &authzv1.AddPoliciesRequest{Policies: ps, RoleLinks: ls})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			for _, p := range r.GetPolicies() {
				fmt.Fprintf(c.OutOrStdout(), "%s\t%s\n", p.GetId(), policyLine(p))
			}
			fmt.Fprintf(c.OutOrStdout(), "policy_version %d\n", r.GetPolicyVersion())
			return nil
		},
	}
	add.Flags().StringVar(&addFile, "file", "", "read lines from this file (- = stdin)")

	var rmFile string
	remove := &cobra.Command{
		Use:   "remove [ID|LINE]...",
		Short: "Remove lines (by id p:... or exact line) and links atomically",
		RunE: func(c *cobra.Command, args []string) error {
			lines, err := readLinesArg(nil, rmFile)
			if err != nil {
				return err
			}
			var ids []string
			for _, a := range args {
				if strings.HasPrefix(strings.TrimSpace(a), "p:") {
					ids = append(ids, strings.TrimSpace(a))
				} else {
					lines = append(lines, a)
				}
			}
			ps, ls, err := parseCLILines(lines)
			if err != nil {
				return err
			}
			if len(ids)+len(ps)+len(ls) == 0 {
				return fmt.Errorf("nothing to remove: give ids, lines or --file")
			}
			cl, done, err := client()
			if err != nil {
				return err
			}
			defer done()
			r, err := cl.RemovePolicies(callCtx(c), &authzv1.RemovePoliciesRequest{PolicyIds: ids, Policies: ps, RoleLinks: ls})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "removed %d, policy_version %d\n", r.GetRemoved(), r.GetPolicyVersion())
			return nil
		},
	}
	remove.Flags().StringVar(&rmFile, "file", "", "read lines to remove from this file (- = stdin)")
	cmd.AddCommand(list, add, remove)
	return cmd
}

// parseSince accepts a duration ("1h": that long ago) or an RFC 3339 time.
func parseSince(s string, now time.Time) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return timestamppb.New(now.Add(-d)), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("--since: want a duration (1h) or an RFC 3339 time, got %q", s)
	}
	return timestamppb.New(t), nil
}

// newDecisionsCmd returns `toolplane decisions list`, a client of
// AuthzService.ListDecisions (admin credential; the caller's tenant), newest
// first.
func newDecisionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "decisions", Short: "Read the authorization decision log (audit)"}
	cf := addClientFlags(cmd)
	var asJSON, onlyAllow, onlyDeny bool
	var subject, resource, kind, since, pageToken string
	var limit int32
	list := &cobra.Command{
		Use: "list", Short: "List decision records of the caller's tenant, newest first", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			req := &authzv1.ListDecisionsRequest{Subject: subject, PageSize: limit, PageToken: pageToken}
			switch {
			case onlyAllow && onlyDeny:
				return fmt.Errorf("--allow and --deny exclude each other")
			case onlyAllow:
				t := true
				req.Allow = &t
			case onlyDeny:
				f := false
				req.Allow = &f
			}
			if resource != "" {
				rt, ok := cliResources[resource]
				if !ok {
					return fmt.Errorf("--resource: want %s, got %q", cliResourceList, resource)
				}
				req.ResourceType = rt
			}
			switch kind {
			case "":
			case "authorize":
				req.Kind = authzv1.DecisionKind_DECISION_KIND_AUTHORIZE
			case "filter":
				req.Kind = authzv1.DecisionKind_DECISION_KIND_FILTER
			default:
				return fmt.Errorf("--kind: want authorize or filter, got %q", kind)
			}
			ts, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			req.Since = ts
			cc, err := cf.dial()
			if err != nil {
				return err
			}
			defer cc.Close()
			r, err := authzv1.NewAuthzServiceClient(cc).ListDecisions(callCtx(c), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), r)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tKIND\tSUBJECT\tRESOURCE\tACTION\tTARGET\tRESULT\tVERSION\tREASON")
			for _, d := range r.GetDecisions() {
				result, reason := "deny", ""
				if d.GetAllow() {
					result = "allow"
				}
				if len(d.GetReasons()) > 0 {
					reason = d.GetReasons()[0].GetCode() + ": " + d.GetReasons()[0].GetMessage()
				}
				target := d.GetTarget()
				if d.GetKind() == authzv1.DecisionKind_DECISION_KIND_FILTER {
					result = fmt.Sprintf("%d/%d allowed", d.GetAllowedCount(), d.GetCandidateCount())
					if len(d.GetDenied()) > 0 {
						target = "denied: " + strings.Join(d.GetDenied(), ",")
					}
				}
				if len(reason) > 100 {
					reason = reason[:97] + "..."
				}
				if len(target) > 60 {
					target = target[:57] + "..."
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.GetTime().AsTime().Format(time.RFC3339),
					strings.ToLower(strings.TrimPrefix(d.GetKind().String(), "DECISION_KIND_")), d.GetPrincipal().GetSubject(),
					strings.ToLower(strings.TrimPrefix(d.GetResourceType().String(), "RESOURCE_TYPE_")),
					strings.ToLower(strings.TrimPrefix(d.GetAction().String(), "ACTION_")), target, result, d.GetPolicyVersion(), reason)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if r.GetNextPageToken() != "" {
				fmt.Fprintf(c.OutOrStdout(), "next page: --page-token %s\n", r.GetNextPageToken())
			}
			return nil
		},
	}
	fl := list.Flags()
	addOutputFlags(fl, &asJSON)
	fl.StringVar(&subject, "subject", "", "only this subject")
	fl.BoolVar(&onlyAllow, "allow", false, "only allowed decisions")
	fl.BoolVar(&onlyDeny, "deny", false, "only denied decisions")
	fl.StringVar(&resource, "resource", "", "only this resource type ("+cliResourceList+")")
	fl.StringVar(&kind, "kind", "", "only authorize or filter records")
	fl.StringVar(&since, "since", "", "only records since a duration ago (1h) or an RFC 3339 time")
	fl.Int32Var(&limit, "limit", 50, "page size (1..1000)")
	fl.StringVar(&pageToken, "page-token", "", "page token from a previous listing")
	cmd.AddCommand(list)
	return cmd
}
