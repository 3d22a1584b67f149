package runtimestore

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// Memory is an in-memory Store for tests. It keeps deep copies, so callers
// can never alias stored state.
type Memory struct {
	mu       sync.Mutex
	threads  map[string]*Thread
	messages map[string][]*runtimev1.Message
	events   map[string][]Event
	runs     map[string][]*runtimev1.Run
	agents   map[string]*runtimev1.Agent
	leases   map[string]*memLease           // by run id (leases.go)
	seqs     map[string]int64               // last event seq by run id (SetEventSeq)
	calls    map[string]map[string]*memCall // thread id → call id (toolcalls.go)
	seq      int64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{threads: map[string]*Thread{}, messages: map[string][]*runtimev1.Message{},
		events: map[string][]Event{}, runs: map[string][]*runtimev1.Run{}, agents: map[string]*runtimev1.Agent{}}
}

// CreateThread implements Store.
func (m *Memory) CreateThread(_ context.Context, t *Thread) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := t.Proto.GetThreadId()
	if _, ok := m.threads[id]; ok {
		return errorsExists(id)
	}
	m.threads[id] = t.Clone()
	return nil
}

// GetThread implements Store.
func (m *Memory) GetThread(_ context.Context, id string) (*Thread, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.threads[id]
	if !ok {
		return nil, ErrNotFound
	}
	return t.Clone(), nil
}

// ListThreads implements Store.
func (m *Memory) ListThreads(_ context.Context, tenant, subject string, p Page) ([]*Thread, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []*Thread
	for _, t := range m.threads {
		if t.Proto.GetOwnerTenant() == tenant && t.Proto.GetOwnerSubject() == subject && t.Child == nil {
			all = append(all, t)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].Proto.GetCreateTime().AsTime(), all[j].Proto.GetCreateTime().AsTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return all[i].Proto.GetThreadId() > all[j].Proto.GetThreadId()
	})
	start, end, next := window(len(all), p)
	out := make([]*Thread, 0, end-start)
	for _, t := range all[start:end] {
		out = append(out, t.Clone())
	}
	return out, next, nil
}

func window(n int, p Page) (start, end int, next string) {
	start, _ = strconv.Atoi(p.Token)
	if start < 0 || start > n {
		start = n
	}
	limit := p.Limit
	if limit <= 0 {
		limit = n
	}
	end = min(start+limit, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next
}

// UpdateThread implements Store.
func (m *Memory) UpdateThread(ctx context.Context, id string, fn Update) (*Thread, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.threads[id]
	if !ok {
		return nil, ErrNotFound
	}
	work := cur.Clone()
	msgs, err := fn(work)
	if err != nil {
		return nil, err
	}
	if Touches(ctx) {
		work.Proto.UpdateTime = timestamppb.Now()
	}
	SyncReadFiles(work)
	work.Child = cur.Clone().Child // fixed at creation
	m.threads[id] = work
	m.appendLocked(id, msgs)
	if r, ok := CallResultOf(ctx); ok {
		if c := m.calls[id][r.CallID]; c != nil {
			c.State, c.Result = CallDone, append([]byte(nil), r.Result...)
		}
	}
	return work.Clone(), nil
}

// ChildThreads implements Store.
func (m *Memory) ChildThreads(_ context.Context, parentID string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, t := range m.threads {
		if t.Child != nil && t.Child.ParentThreadID == parentID {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteThread implements Store.
func (m *Memory) DeleteThread(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[id]; !ok {
		return ErrNotFound
	}
	delete(m.threads, id)
	delete(m.messages, id)
	delete(m.events, id)
	delete(m.runs, id)
	delete(m.calls, id)
	return nil
}

// AppendMessages implements Store.
func (m *Memory) AppendMessages(_ context.Context, threadID string, msgs ...*runtimev1.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[threadID]; !ok {
		return ErrNotFound
	}
	m.appendLocked(threadID, msgs)
	return nil
}

func (m *Memory) appendLocked(threadID string, msgs []*runtimev1.Message) {
	for _, msg := range msgs {
		c := proto.Clone(msg).(*runtimev1.Message)
		FillMessage(c)
		m.messages[threadID] = append(m.messages[threadID], c)
	}
}

// FillMessage sets a missing id (UUID) and create_time (now) of msg.
func FillMessage(msg *runtimev1.Message) {
	if msg.Id == "" {
		msg.Id = uuid.NewString()
	}
	if msg.CreateTime == nil {
		msg.CreateTime = timestamppb.Now()
	}
}

// ListMessages implements Store.
func (m *Memory) ListMessages(_ context.Context, threadID string, p Page) ([]*runtimev1.Message, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.messages[threadID]
	start, end, next := window(len(all), p)
	out := make([]*runtimev1.Message, 0, end-start)
	for _, msg := range all[start:end] {
		out = append(out, proto.Clone(msg).(*runtimev1.Message))
	}
	return out, next, nil
}

// AppendEvent implements Store.
func (m *Memory) AppendEvent(_ context.Context, e Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[e.ThreadID]; !ok {
		return ErrNotFound
	}
	m.seq++
	e.Seq = m.seq
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	m.events[e.ThreadID] = append(m.events[e.ThreadID], e)
	return nil
}

// ListEvents implements Store.
func (m *Memory) ListEvents(_ context.Context, threadID string) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events[threadID]...), nil
}

// PutRun implements Store.
func (m *Memory) PutRun(_ context.Context, r *runtimev1.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[r.GetThreadId()]; !ok {
		return ErrNotFound
	}
	c := proto.Clone(r).(*runtimev1.Run)
	runs := m.runs[r.GetThreadId()]
	for i, x := range runs {
		if x.GetRunId() == r.GetRunId() {
			runs[i] = c
			return nil
		}
	}
	m.runs[r.GetThreadId()] = append(runs, c)
	return nil
}

// GetRun implements Store.
func (m *Memory) GetRun(_ context.Context, threadID, runID string) (*runtimev1.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.runs[threadID] {
		if r.GetRunId() == runID {
			return proto.Clone(r).(*runtimev1.Run), nil
		}
	}
	return nil, ErrNotFound
}

// ListRuns implements Store.
func (m *Memory) ListRuns(_ context.Context, threadID string) ([]*runtimev1.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	runs := m.runs[threadID]
	out := make([]*runtimev1.Run, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		out = append(out, proto.Clone(runs[i]).(*runtimev1.Run))
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].GetStartTime().AsTime().After(out[j].GetStartTime().AsTime())
	})
	return out, nil
}

// InterruptUnfinished implements Store.
func (m *Memory) InterruptUnfinished(_ context.Context, reason string, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, runs := range m.runs {
		for _, r := range runs {
			if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING {
				r.Status = runtimev1.RunStatus_RUN_STATUS_INTERRUPTED
				r.Reason = reason
				r.EndTime = timestamppb.New(now)
				n++
			}
		}
	}
	return n, nil
}

// PutAgent implements Store.
func (m *Memory) PutAgent(_ context.Context, a *runtimev1.Agent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.agents[a.GetName()] = proto.Clone(a).(*runtimev1.Agent)
	return nil
}

// GetAgent implements Store.
func (m *Memory) GetAgent(_ context.Context, name string) (*runtimev1.Agent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.agents[name]
	if !ok {
		return nil, ErrNotFound
	}
	return proto.Clone(a).(*runtimev1.Agent), nil
}

// ListAgents implements Store.
func (m *Memory) ListAgents(_ context.Context) ([]*runtimev1.Agent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*runtimev1.Agent, 0, len(m.agents))
	for _, a := range m.agents {
		out = append(out, proto.Clone(a).(*runtimev1.Agent))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// DeleteAgent implements Store.
func (m *Memory) DeleteAgent(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.agents[name]; !ok {
		return ErrNotFound
	}
	delete(m.agents, name)
	return nil
}

// PurgeThreadsBefore implements Store.
func (m *Memory) PurgeThreadsBefore(_ context.Context, t time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, th := range m.threads {
		if th.Proto.GetUpdateTime().AsTime().Before(t) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		delete(m.threads, id)
		delete(m.messages, id)
		delete(m.events, id)
		delete(m.runs, id)
		delete(m.calls, id)
	}
	return ids, nil
}

// IdleThreads implements IdleThreadScanner.
func (m *Memory) IdleThreads(_ context.Context, t time.Time, after string, limit int) ([]*Thread, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, th := range m.threads {
		if id > after && th.Proto.GetUpdateTime().AsTime().Before(t) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]*Thread, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.threads[id].Clone())
	}
	return out, nil
}

// PurgeRunsBefore implements Store.
func (m *Memory) PurgeRunsBefore(_ context.Context, t time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, runs := range m.runs {
		keep := runs[:0:0]
		for _, r := range runs {
			if finished(r.GetStatus()) && r.GetStartTime().AsTime().Before(t) {
				n++
				continue
			}
			keep = append(keep, r)
		}
		m.runs[id] = keep
	}
	return n, nil
}

// finished reports whether a run with status st may be removed by retention.
func finished(st runtimev1.RunStatus) bool {
	return st != runtimev1.RunStatus_RUN_STATUS_RUNNING && st != runtimev1.RunStatus_RUN_STATUS_WAITING_FOR_INPUT
}

// PurgeMessagesBefore implements Store.
func (m *Memory) PurgeMessagesBefore(_ context.Context, t time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, msgs := range m.messages {
		if c := CutTurns(msgs, t); c > 0 {
			m.messages[id] = append([]*runtimev1.Message(nil), msgs[c:]...)
			n += c
		}
	}
	return n, nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

type memLease struct {
	owner  string
	until  time.Time
	cancel bool
}

func (m *Memory) findRun(threadID, runID string) *runtimev1.Run {
	for _, r := range m.runs[threadID] {
		if r.GetRunId() == runID {
			return r
		}
	}
	return nil
}

// StartRun implements Store.
func (m *Memory) StartRun(_ context.Context, r *runtimev1.Run, l Lease, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[r.GetThreadId()]; !ok {
		return ErrNotFound
	}
	if m.leases == nil {
		m.leases = map[string]*memLease{}
	}
	for _, x := range m.runs[r.GetThreadId()] {
		if x.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
			continue
		}
		xl := m.leases[x.GetRunId()]
		live := xl != nil && xl.until.After(now)
		if x.GetRunId() != r.GetRunId() && live {
			return ErrRunBusy
		}
		if x.GetRunId() == r.GetRunId() && live && xl.owner != l.Owner {
			return ErrRunBusy
		}
	}
	c := proto.Clone(r).(*runtimev1.Run)
	if x := m.findRun(r.GetThreadId(), r.GetRunId()); x != nil {
		proto.Reset(x)
		proto.Merge(x, c)
	} else {
		m.runs[r.GetThreadId()] = append(m.runs[r.GetThreadId()], c)
	}
	m.leases[r.GetRunId()] = &memLease{owner: l.Owner, until: l.Until}
	return nil
}

// RenewLeases implements Store.
func (m *Memory) RenewLeases(_ context.Context, owner string, until time.Time) ([]LeasedRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []LeasedRun
	for tid, runs := range m.runs {
		for _, r := range runs {
			l := m.leases[r.GetRunId()]
			if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING && l != nil && l.owner == owner {
				l.until = until
				out = append(out, LeasedRun{RunRef: RunRef{ThreadID: tid, RunID: r.GetRunId()}, CancelRequested: l.cancel})
			}
		}
	}
	return out, nil
}

// CancelRequested implements Store.
func (m *Memory) CancelRequested(_ context.Context, owner string) ([]RunRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RunRef
	for tid, runs := range m.runs {
		for _, r := range runs {
			l := m.leases[r.GetRunId()]
			if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING && l != nil && l.owner == owner && l.cancel {
				out = append(out, RunRef{ThreadID: tid, RunID: r.GetRunId()})
			}
		}
	}
	return out, nil
}

// RequestCancel implements Store.
func (m *Memory) RequestCancel(_ context.Context, threadID, runID string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.findRun(threadID, runID)
	if r == nil {
		return "", false, ErrNotFound
	}
	if r.GetStatus() != runtimev1.RunStatus_RUN_STATUS_RUNNING {
		return "", false, nil
	}
	if m.leases == nil {
		m.leases = map[string]*memLease{}
	}
	l := m.leases[runID]
	if l == nil {
		l = &memLease{}
		m.leases[runID] = l
	}
	l.cancel = true
	return l.owner, true, nil
}

// InterruptExpired implements Store.
func (m *Memory) InterruptExpired(_ context.Context, reason string, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, runs := range m.runs {
		for _, r := range runs {
			l := m.leases[r.GetRunId()]
			if r.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING && (l == nil || l.until.Before(now)) {
				r.Status = runtimev1.RunStatus_RUN_STATUS_INTERRUPTED
				r.Reason = reason
				r.EndTime = timestamppb.New(now)
				n++
			}
		}
	}
	return n, nil
}

type memCall struct {
	ToolCall
	created time.Time
}

// ClaimToolCall implements Store.
func (m *Memory) ClaimToolCall(_ context.Context, threadID, callID, fingerprint string, l Lease) (bool, ToolCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.threads[threadID]; !ok {
		return false, ToolCall{}, ErrNotFound
	}
	if m.calls == nil {
		m.calls = map[string]map[string]*memCall{}
	}
	if m.calls[threadID] == nil {
		m.calls[threadID] = map[string]*memCall{}
	}
	if c := m.calls[threadID][callID]; c != nil {
		return false, c.copy(), nil
	}
	m.calls[threadID][callID] = &memCall{ToolCall: ToolCall{State: CallRunning, Fingerprint: fingerprint, Lease: l}, created: time.Now()}
	return true, ToolCall{}, nil
}

func (c *memCall) copy() ToolCall {
	out := c.ToolCall
	out.Result = append([]byte(nil), c.Result...)
	return out
}

// GetToolCall implements Store.
func (m *Memory) GetToolCall(_ context.Context, threadID, callID string) (ToolCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.calls[threadID][callID]; c != nil {
		return c.copy(), nil
	}
	return ToolCall{}, ErrNotFound
}

// SettleToolCall implements Store.
func (m *Memory) SettleToolCall(_ context.Context, threadID, callID string, result []byte, now time.Time) (ToolCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls[threadID][callID]
	if c == nil {
		return ToolCall{}, ErrNotFound
	}
	if c.State == CallRunning && c.Lease.Until.Before(now) {
		c.State, c.Result = CallDone, append([]byte(nil), result...)
	}
	return c.copy(), nil
}

// ReleaseToolCall implements Store.
func (m *Memory) ReleaseToolCall(_ context.Context, threadID, callID, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.calls[threadID][callID]; c != nil && c.State == CallRunning && c.Lease.Owner == owner {
		delete(m.calls[threadID], callID)
	}
	return nil
}

// PurgeToolCallsBefore implements Store.
func (m *Memory) PurgeToolCallsBefore(_ context.Context, t time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, cs := range m.calls {
		for id, c := range cs {
			if c.created.Before(t) {
				delete(cs, id)
				n++
			}
		}
	}
	return n, nil
}

// EndRunUnlessLeased implements Store.
func (m *Memory) EndRunUnlessLeased(_ context.Context, r *runtimev1.Run, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.findRun(r.GetThreadId(), r.GetRunId())
	if x == nil {
		return false, ErrNotFound
	}
	if l := m.leases[r.GetRunId()]; x.GetStatus() == runtimev1.RunStatus_RUN_STATUS_RUNNING && l != nil && l.until.After(now) {
		return false, nil
	}
	proto.Reset(x)
	proto.Merge(x, proto.Clone(r).(*runtimev1.Run))
	return true, nil
}

// SetEventSeq implements Store.
func (m *Memory) SetEventSeq(_ context.Context, threadID, runID string, seq int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.findRun(threadID, runID) == nil {
		return ErrNotFound
	}
	if m.seqs == nil {
		m.seqs = map[string]int64{}
	}
	m.seqs[runID] = seq
	return nil
}

// EventSeq implements Store.
func (m *Memory) EventSeq(_ context.Context, threadID, runID string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.findRun(threadID, runID) == nil {
		return 0, ErrNotFound
	}
	return m.seqs[runID], nil
}
