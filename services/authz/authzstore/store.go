// Package authzstore is the storage seam of the authz service (docs/conventions.md §3):
// the Store interface every implementation satisfies (authzsqlite, the
// default; authzmem, in memory), the types it exchanges, the group-commit
// decision Log written over any Store, and helpers. The conformance suite is
// authztest.RunStoreSuite.
package authzstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
)

// Sentinel errors every store returns (wrapped, with details naming the item).
var (
	// ErrNotFound: a line, link or id to remove does not exist.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly: the line is owned by the policy file or the DeerFlow import.
	ErrReadOnly = errors.New("read-only policy line")
)

// Store is the authz service's storage. Every policy change bumps the policy
// version atomically with the change; Snapshot returns a set consistent with
// its version. Implementations are safe for concurrent use.
type Store interface {
	// Snapshot returns the whole policy, in store order, and its version.
	Snapshot(ctx context.Context) (authzcasbin.PolicySet, error)
	// Version returns the current policy version.
	Version(ctx context.Context) (int64, error)
	// Apply applies an API change atomically (see Change) and returns the
	// version after it and the number of lines and links added or removed.
	Apply(ctx context.Context, ch Change) (version int64, changed int, err error)
	// SeedDefault inserts rules with source "default" only into a store that
	// holds no line and no link; it reports whether it did.
	SeedDefault(ctx context.Context, rules []authzcasbin.Rule) (bool, error)
	// ReplaceSource replaces every line and link owned by source ("deerflow"
	// or "file"), and deletes the "default" lines of the subjects in
	// dropDefaultFor, atomically. A new line identical to a line of another
	// source is skipped. The version is bumped only when something changed.
	ReplaceSource(ctx context.Context, source string, rules []authzcasbin.Rule, links []authzcasbin.Link, dropDefaultFor []string) (int64, bool, error)
	// AppendDecisions writes decision records in one transaction.
	AppendDecisions(ctx context.Context, recs []*DecisionRecord) error
	// ListDecisions returns up to limit records matching f (Tenant
	// required), newest first, with sequence below before (0 = newest), and
	// the before value of the next page (0 on the last page).
	ListDecisions(ctx context.Context, f Filter, limit int, before int64) ([]*DecisionRecord, int64, error)
	// Prune applies retention (see Retention); it returns how many records
	// it deleted.
	Prune(ctx context.Context, r Retention) (int64, error)
	// Ready returns nil when the store answers.
	Ready(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Notifier is implemented by stores shared by several processes
// (authzpg): it reports policy changes committed by any of them, so every
// replica reloads at once instead of at its next version check.
type Notifier interface {
	// Listen calls fn with the version of every committed policy change
	// until ctx ends; fn(0) means "re-check the version" (after every
	// (re)connection, when notifications may have been missed).
	Listen(ctx context.Context, fn func(version int64))
}

// Editable reports whether the API may remove a line of the source.
func Editable(source string) bool {
	return source == authzcasbin.SourceAPI || source == authzcasbin.SourceDefault
}

// Change is one atomic policy change through the API. Every line is
// validated first; additions get source "api" (an identical existing line is
// left as it is); removals must name existing, API-editable lines.
type Change struct {
	AddRules      []authzcasbin.Rule
	AddLinks      []authzcasbin.Link
	RemoveRuleIDs []string
	RemoveRules   []authzcasbin.Rule
	RemoveLinks   []authzcasbin.Link
}

// Validate checks every added line and link; errors wrap
// authzcasbin.ErrInvalidPolicy and name the item ("policies[2].target: ...").
func (ch Change) Validate() error {
	for i, r := range ch.AddRules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: policies[%d].%v", authzcasbin.ErrInvalidPolicy, i, err)
		}
	}
	for i, l := range ch.AddLinks {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: role_links[%d].%v", authzcasbin.ErrInvalidPolicy, i, err)
		}
	}
	return nil
}

// ValidateReplace checks the lines and links of a ReplaceSource call.
func ValidateReplace(source string, rules []authzcasbin.Rule, links []authzcasbin.Link) error {
	if source != authzcasbin.SourceDeerFlow && source != authzcasbin.SourceFile {
		return fmt.Errorf("authz store: source %q cannot be replaced", source)
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: %s line %d: %v", authzcasbin.ErrInvalidPolicy, source, i+1, err)
		}
	}
	for i, l := range links {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: %s link %d: %v", authzcasbin.ErrInvalidPolicy, source, i+1, err)
		}
	}
	return nil
}

// Kind is the kind of a decision record.
type Kind int

// Kinds of decision records (authz.proto DecisionKind).
const (
	KindAuthorize Kind = 1 // one Authorize decision
	KindFilter    Kind = 2 // one summary per FilterResources call
	KindRefusal   Kind = 3 // a refusal decided outside authz (RecordRefusal)
)

// CallContext is the trusted call context kept with a record.
type CallContext struct {
	Agent      string `json:"agent,omitempty"`
	IsSubagent bool   `json:"is_subagent,omitempty"`
	ThreadID   string `json:"thread_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// DecisionRecord is one entry of the append-only decision log.
type DecisionRecord struct {
	Seq int64 `json:"-"` // store sequence (set when read)
	// Encoded is the record\'s JSON, computed by Log.Append in the caller\'s
	// goroutine; a store may write it instead of marshalling again.
	Encoded        []byte               `json:"-"`
	ID             string               `json:"id"`
	Kind           Kind                 `json:"kind"`
	Time           time.Time            `json:"time"`
	Tenant         string               `json:"tenant"`
	Subject        string               `json:"subject"`
	Roles          []string             `json:"roles,omitempty"`
	Attributes     map[string]string    `json:"attributes,omitempty"`
	Resource       string               `json:"resource"`
	Action         string               `json:"action"`
	Target         string               `json:"target,omitempty"`
	CallContext    *CallContext         `json:"call_context,omitempty"`
	Input          map[string]any       `json:"input,omitempty"` // bounded copy (see BoundInput)
	Allow          bool                 `json:"allow"`
	Reasons        []authzcasbin.Reason `json:"reasons,omitempty"`
	PolicyID       string               `json:"policy_id,omitempty"`
	PolicyVersion  int64                `json:"policy_version"`
	CandidateCount int                  `json:"candidate_count,omitempty"`
	AllowedCount   int                  `json:"allowed_count,omitempty"`
	Denied         []string             `json:"denied,omitempty"`
}

// Retention says which decision records Prune deletes
// (docs/architecture.md §5, "decision log"). A flood of one tenant's
// records never evicts another tenant's, and never a deny younger than
// DeniesBefore.
type Retention struct {
	// AllowsBefore: allows and FilterResources summaries older than this are
	// deleted (zero = no age limit).
	AllowsBefore time.Time
	// DeniesBefore: Authorize denies older than this are deleted (zero = no
	// age limit).
	DeniesBefore time.Time
	// MaxRowsPerTenant caps each tenant's records (0 = no cap): over it, the
	// tenant's oldest allows and summaries are deleted first; its denies are
	// kept (they are bounded by DeniesBefore and the per-principal record
	// rate).
	MaxRowsPerTenant int64
}

// Evictable reports whether the cap may delete r (an allow or a summary).
func (r *DecisionRecord) Evictable() bool { return r.Allow || r.Kind == KindFilter }

// Filter selects decision records. Tenant is required (the log is
// tenant-scoped); the other fields are optional.
type Filter struct {
	Tenant   string
	Subject  string
	Allow    *bool
	Resource string
	Kind     Kind
	Since    time.Time
}

// BoundInput returns a copy of the input bounded for the log: strings longer
// than maxString bytes are truncated (with a "…" marker), nesting deeper than
// 8 levels is replaced by "…", and once the copy's JSON size passes maxTotal
// bytes the remaining fields are dropped and "_truncated": true is set.
func BoundInput(in map[string]any, maxString, maxTotal int) map[string]any {
	if in == nil {
		return nil
	}
	budget := maxTotal
	out, truncated := boundMap(in, maxString, &budget, 0)
	if truncated {
		out["_truncated"] = true
	}
	return out
}

func boundMap(in map[string]any, maxString int, budget *int, depth int) (map[string]any, bool) {
	out := make(map[string]any, len(in))
	truncated := false
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if *budget <= 0 {
			return out, true
		}
		*budget -= len(k) + 4
		v, t := boundValue(in[k], maxString, budget, depth+1)
		out[k] = v
		truncated = truncated || t
	}
	return out, truncated
}

func boundValue(v any, maxString int, budget *int, depth int) (any, bool) {
	if depth > 8 {
		*budget -= 3
		return "…", true
	}
	switch x := v.(type) {
	case string:
		if len(x) > maxString {
			*budget -= maxString + 3
			return x[:maxString] + "…", true
		}
		*budget -= len(x) + 2
		return x, false
	case map[string]any:
		return boundMap(x, maxString, budget, depth)
	case []any:
		out := make([]any, 0, len(x))
		t := false
		for _, e := range x {
			if *budget <= 0 {
				return out, true
			}
			ev, et := boundValue(e, maxString, budget, depth+1)
			out = append(out, ev)
			t = t || et
		}
		return out, t
	default:
		*budget -= 8
		return x, false
	}
}
