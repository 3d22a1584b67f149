package authz

import (
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/toolplane/toolplane/services/authz/authzcasbin"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

// floodGuard bounds the decision records one principal (tenant, subject)
// writes: a token bucket of authz.decision_rate records/s with
// authz.decision_burst. Over it, the principal's records are counted, not
// stored, and the first refused record of each authz.decision_flood_window
// becomes one authz.audit_flood record — so flooding is recorded once per
// window, not per request, and cannot push other records out
// (docs/architecture.md §5, decision 0133).
type floodGuard struct {
	rate, burst float64
	window      time.Duration

	mu sync.Mutex
	m  map[floodKey]*floodState
}

type floodKey struct{ tenant, subject string }

type floodState struct {
	tokens      float64
	last        time.Time
	windowStart time.Time // start of the window of the last report
	suppressed  int64     // records not stored since the last report
	flooding    bool
}

// maxFloodEntries bounds the principals tracked; idle ones are dropped first.
const maxFloodEntries = 100_000

func newFloodGuard(cfg Config) *floodGuard {
	if cfg.DecisionRate < 0 {
		return nil
	}
	return &floodGuard{rate: cfg.DecisionRate, burst: float64(cfg.DecisionBurst), window: cfg.DecisionFloodWindow, m: map[floodKey]*floodState{}}
}

// admit reports whether the principal's record may be stored; when not,
// report is non-nil for the first refused record of a window (the
// authz.audit_flood record to store instead).
func (g *floodGuard) admit(tenant, subject string, roles []string, now time.Time) (ok bool, report *authzstore.DecisionRecord) {
	if g == nil {
		return true, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := floodKey{tenant, subject}
	st := g.m[k]
	if st == nil {
		if len(g.m) >= maxFloodEntries {
			g.evictIdle(now)
		}
		st = &floodState{tokens: g.burst, last: now}
		g.m[k] = st
	}
	st.tokens = min(g.burst, st.tokens+now.Sub(st.last).Seconds()*g.rate)
	st.last = now
	if st.tokens >= 1 {
		st.tokens--
		return true, nil
	}
	st.suppressed++
	if st.flooding && now.Sub(st.windowStart) < g.window {
		return false, nil
	}
	prev := st.suppressed - 1
	st.flooding, st.windowStart, st.suppressed = true, now, 1
	msg := fmt.Sprintf("principal %q of tenant %q writes more than %g decision records/s (burst %g): its further records until %s are counted, not stored",
		subject, tenant, g.rate, g.burst, now.Add(g.window).UTC().Format(time.RFC3339))
	if prev > 0 {
		msg += fmt.Sprintf("; %d were not stored in the previous window", prev)
	}
	return false, &authzstore.DecisionRecord{
		ID: uuid.Must(uuid.NewV7()).String(), Kind: authzstore.KindAuthorize, Time: now.UTC(),
		Tenant: tenant, Subject: subject, Roles: roles, Resource: "decision_log", Action: "flood",
		Reasons: []authzcasbin.Reason{{Code: authzcasbin.CodeAuditFlood, Message: msg}},
	}
}

// evictIdle drops principals whose bucket is full again (idle long enough).
func (g *floodGuard) evictIdle(now time.Time) {
	full := time.Duration(g.burst / max(g.rate, 1e-9) * float64(time.Second))
	for k, st := range g.m {
		if now.Sub(st.last) >= full && now.Sub(st.windowStart) >= g.window {
			delete(g.m, k)
		}
	}
	if len(g.m) >= maxFloodEntries { // all busy: forget the oldest half's state (they start with a full bucket)
		n := 0
		for k := range g.m {
			delete(g.m, k)
			if n++; n >= maxFloodEntries/2 {
				break
			}
		}
	}
}
