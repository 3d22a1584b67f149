package authzstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Log writes decision records with group commit: concurrent appends are
// batched into one transaction by a single writer goroutine. Append with
// wait=true returns only after the record's transaction committed (or
// failed), so a deny is durable before Authorize answers.
type Log struct {
	s        Store
	ch       chan *entry
	maxBatch int
	mu       sync.RWMutex
	closed   bool
	done     chan struct{}
}

type entry struct {
	rec *DecisionRecord
	res chan error // nil: fire and forget
}

// ErrLogClosed is returned by Append after Close.
var ErrLogClosed = errors.New("decision log closed")

// NewLog starts the log writer over s; maxBatch bounds one transaction
// (default 512).
func NewLog(s Store, maxBatch int) *Log {
	if maxBatch <= 0 {
		maxBatch = 512
	}
	l := &Log{s: s, ch: make(chan *entry, 4*maxBatch), maxBatch: maxBatch, done: make(chan struct{})}
	go l.run()
	return l
}

// Append queues the record; with wait it blocks until the record is
// committed and returns the commit error. Without wait, a write error is
// lost for this caller (it is still counted by the returned error of a
// waiting caller in the same batch).
func (l *Log) Append(ctx context.Context, rec *DecisionRecord, wait bool) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("decision %s: %w", rec.ID, err)
	}
	rec.Encoded = body
	e := &entry{rec: rec}
	if wait {
		e.res = make(chan error, 1)
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrLogClosed
	}
	select {
	case l.ch <- e:
		l.mu.RUnlock()
	case <-ctx.Done():
		l.mu.RUnlock()
		return ctx.Err()
	}
	if !wait {
		return nil
	}
	select {
	case err := <-e.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Log) run() {
	defer close(l.done)
	batch := make([]*entry, 0, l.maxBatch)
	recs := make([]*DecisionRecord, 0, l.maxBatch)
	for first := range l.ch {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < l.maxBatch {
			select {
			case e, ok := <-l.ch:
				if !ok {
					break drain
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		recs = recs[:0]
		for _, e := range batch {
			recs = append(recs, e.rec)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := l.s.AppendDecisions(ctx, recs)
		cancel()
		for _, e := range batch {
			if e.res != nil {
				e.res <- err
			}
		}
	}
}

// Close stops accepting records, writes the queued ones and waits for the
// writer to finish.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	<-l.done
	return nil
}
