package grpcx

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolplane/toolplane/internal/auth"
)

// RateKind is the kind of an RPC for the per-principal rate limits.
type RateKind int

const (
	// RateNone: not limited (reads).
	RateNone RateKind = iota
	// RateDecision: an RPC that generates authorization decisions or runs
	// tools (each one is audited and may call upstream MCP servers).
	RateDecision
	// RateWrite: an RPC that changes stored state.
	RateWrite
)

// rateKinds classifies the RPCs of every service by method name
// (docs/architecture.md §5, "Bounded cost"); a method not listed is a read.
var rateKinds = map[string]RateKind{
	"Authorize": RateDecision, "FilterResources": RateDecision, "AssembleTools": RateDecision,
	"ExecuteToolCall": RateDecision, "ExecuteToolCallStream": RateDecision, "RunTurn": RateDecision, "ResumeRun": RateDecision,
	"CallTool": RateDecision, "CallToolStream": RateDecision, "InvokeAcpAgent": RateDecision, "SearchTools": RateDecision, "ResolveSkillPolicy": RateDecision,

	"AddPolicies": RateWrite, "RemovePolicies": RateWrite, "UpdateServer": RateWrite, "ReplaceServers": RateWrite, "ReloadServers": RateWrite,
	"CreateThread": RateWrite, "DeleteThread": RateWrite, "CancelRun": RateWrite, "UpsertAgent": RateWrite, "DeleteAgent": RateWrite,
	"InstallSkill": RateWrite, "UpdateSkill": RateWrite, "DeleteSkill": RateWrite, "RollbackSkill": RateWrite, "ScanSkill": RateWrite,
	"ReviewSkillPackage": RateWrite, "RecordRefusal": RateWrite, "UploadThreadFile": RateWrite, "ConnectServer": RateWrite, "DisconnectServer": RateWrite, "ConnectMyServer": RateWrite, "DisconnectMyServer": RateWrite,
}

// RateKindOf returns the rate kind of a full method name.
func RateKindOf(fullMethod string) RateKind {
	return rateKinds[fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]]
}

// RoleRate is the token bucket of one role (server.rate_limits[]).
type RoleRate struct {
	// Role the entry applies to; "default" applies to a principal none of
	// whose roles has an entry.
	Role string
	// DecisionsPerSecond and DecisionsBurst size the bucket of decision RPCs.
	DecisionsPerSecond float64
	DecisionsBurst     int
	// WritesPerSecond and WritesBurst size the bucket of write RPCs.
	WritesPerSecond float64
	WritesBurst     int
}

// ReasonRateLimited is the ErrorInfo reason of a call refused by a rate limit.
const ReasonRateLimited = "RATE_LIMITED"

// RateLimiter holds one token bucket per principal and RPC kind
// (golang.org/x/time/rate). Callers with a service credential are not
// limited: the runtime's own calls upstream are paid for by the request
// that caused them, which the runtime's own listener already limited.
type RateLimiter struct {
	roles   map[string]RoleRate
	buckets *lru.Cache[string, *rate.Limiter]
	now     func() time.Time
}

// NewRateLimiter builds a limiter; nil when rates is empty (no limits).
func NewRateLimiter(rates []RoleRate) *RateLimiter {
	if len(rates) == 0 {
		return nil
	}
	l := &RateLimiter{roles: map[string]RoleRate{}, now: time.Now}
	for _, r := range rates {
		l.roles[r.Role] = r
	}
	l.buckets, _ = lru.New[string, *rate.Limiter](65536)
	return l
}

// bucket picks the most generous entry among the principal's roles, else
// "default"; ok false when neither exists (not limited).
func (l *RateLimiter) bucket(p []string, kind RateKind) (string, rate.Limit, int, bool) {
	best, found := RoleRate{}, false
	score := func(r RoleRate) float64 {
		if kind == RateWrite {
			return r.WritesPerSecond
		}
		return r.DecisionsPerSecond
	}
	for _, role := range p {
		if r, ok := l.roles[role]; ok && (!found || score(r) > score(best)) {
			best, found = r, true
		}
	}
	if !found {
		best, found = l.roles["default"]
	}
	if !found {
		return "", 0, 0, false
	}
	if kind == RateWrite {
		return best.Role, rate.Limit(best.WritesPerSecond), best.WritesBurst, true
	}
	return best.Role, rate.Limit(best.DecisionsPerSecond), best.DecisionsBurst, true
}

// Allow takes a token for the caller of ctx; nil, or RESOURCE_EXHAUSTED
// with an ErrorInfo (reason RATE_LIMITED, metadata naming the limit) and a
// google.rpc.RetryInfo saying when a token is available.
func (l *RateLimiter) Allow(ctx context.Context, fullMethod string) error {
	if l == nil {
		return nil
	}
	kind := RateKindOf(fullMethod)
	id, ok := auth.Caller(ctx)
	if kind == RateNone || !ok || id.Kind == auth.KindService {
		return nil
	}
	role, lim, burst, ok := l.bucket(id.Principal.GetRoles(), kind)
	if !ok {
		return nil
	}
	p := id.Principal
	key := strconv.Itoa(int(kind)) + "\x00" + strconv.Itoa(len(p.GetTenant())) + ":" + p.GetTenant() + p.GetSubject()
	b, found := l.buckets.Get(key)
	if !found || b.Limit() != lim || b.Burst() != burst {
		b = rate.NewLimiter(lim, burst)
		l.buckets.Add(key, b)
	}
	now := l.now()
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return rateErr(fullMethod, kind, role, time.Second)
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return rateErr(fullMethod, kind, role, d)
	}
	return nil
}

func rateErr(method string, kind RateKind, role string, retry time.Duration) error {
	field := "decisions_per_second"
	what := "decision"
	if kind == RateWrite {
		field, what = "writes_per_second", "write"
	}
	key := fmt.Sprintf("server.rate_limits[role=%s].%s", role, field)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limit: too many %s RPCs for this principal (%s); retry in %s", what, key, retry.Round(time.Millisecond)))
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonRateLimited, Domain: auth.ErrorDomain, Metadata: map[string]string{"limit": key, "role": role, "method": method}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)},
	); err == nil {
		st = d
	}
	return st.Err()
}
