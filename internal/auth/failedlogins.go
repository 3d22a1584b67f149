package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// FailedLogin is one recorded authentication failure: a credential was
// presented and refused (unknown, expired or badly signed token) on a
// surface ("grpc", "rest" or "mcp") from a source (the client's address).
type FailedLogin struct {
	Surface, Source string
	// Target is what was asked for (the gRPC method, or "POST /mcp").
	Target string
	// Message is the refusal's text (never the credential).
	Message string
	// Suppressed counts the failures of the same source in its previous
	// window that were not recorded one by one.
	Suppressed int
	// Flood marks the record written, once per window, when more sources
	// than FailedLoginsOptions.MaxPerWindow failed in it.
	Flood bool
}

// FailedLoginsOptions configure a FailedLogins.
type FailedLoginsOptions struct {
	// Window: each source is recorded at most once per window (default 1 min).
	Window time.Duration
	// MaxPerWindow bounds the records of one window over all sources
	// (default 100); past it one flood record stands for the rest, so that
	// sources that rotate (spoofed forwarded-for, many addresses) cannot
	// flood the audit either.
	MaxPerWindow int
	// Sources bounds the sources remembered (default 4096, LRU).
	Sources int
	// Logger receives one info line per record (nil: none).
	Logger *slog.Logger
}

// FailedLogins records failed authentications (docs/architecture.md §5,
// "An audit that can't be erased by flooding"): once per window per
// source, logged at info and handed to a sink (the decision log), never
// per request. Note never blocks: records go through a bounded queue to one
// worker; a full queue drops the record (counted in the next).
type FailedLogins struct {
	opts FailedLoginsOptions

	mu          sync.Mutex
	sources     *lru.Cache[string, *loginWindow]
	windowStart time.Time
	inWindow    int
	floodNoted  bool
	now         func() time.Time
	sink        func(context.Context, FailedLogin) error

	queue chan FailedLogin
	stop  chan struct{}
	done  chan struct{}
}

type loginWindow struct {
	start      time.Time
	suppressed int
}

// NewFailedLogins returns a recorder; SetSink connects it to the decision
// log, Close stops it.
func NewFailedLogins(o FailedLoginsOptions) *FailedLogins {
	if o.Window <= 0 {
		o.Window = time.Minute
	}
	if o.MaxPerWindow <= 0 {
		o.MaxPerWindow = 100
	}
	if o.Sources <= 0 {
		o.Sources = 4096
	}
	c, _ := lru.New[string, *loginWindow](o.Sources)
	f := &FailedLogins{opts: o, sources: c, now: time.Now, queue: make(chan FailedLogin, 64), stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

// SetSink sets where records go besides the log (nil: the log only).
func (f *FailedLogins) SetSink(sink func(context.Context, FailedLogin) error) {
	f.mu.Lock()
	f.sink = sink
	f.mu.Unlock()
}

// Note reports one refused credential. It returns whether a record was
// written for it (false: counted within its source's window).
func (f *FailedLogins) Note(surface, source, target, message string) bool {
	if f == nil {
		return false
	}
	now := f.now()
	f.mu.Lock()
	if now.Sub(f.windowStart) >= f.opts.Window {
		f.windowStart, f.inWindow, f.floodNoted = now, 0, false
	}
	key := surface + "\x00" + source
	w, ok := f.sources.Get(key)
	if ok && now.Sub(w.start) < f.opts.Window {
		w.suppressed++
		f.mu.Unlock()
		return false
	}
	rec := FailedLogin{Surface: surface, Source: source, Target: target, Message: message}
	if ok {
		rec.Suppressed = w.suppressed
	}
	if f.inWindow >= f.opts.MaxPerWindow {
		if f.floodNoted {
			f.sources.Add(key, &loginWindow{start: now, suppressed: rec.Suppressed})
			f.mu.Unlock()
			return false
		}
		f.floodNoted = true
		rec = FailedLogin{Surface: surface, Source: "(many)", Target: target, Flood: true,
			Message: fmt.Sprintf("more than %d sources failed to authenticate within %s; further failures of this window are not recorded one by one", f.opts.MaxPerWindow, f.opts.Window)}
	}
	f.inWindow++
	f.sources.Add(key, &loginWindow{start: now})
	f.mu.Unlock()
	select {
	case f.queue <- rec:
	default: // the worker is behind: drop rather than block a request
	}
	return true
}

func (f *FailedLogins) run() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case rec := <-f.queue:
			f.write(rec)
		}
	}
}

func (f *FailedLogins) write(rec FailedLogin) {
	if l := f.opts.Logger; l != nil {
		l.Info("authentication failed", "surface", rec.Surface, "source", rec.Source, "target", rec.Target,
			"reason", rec.Message, "suppressed_in_previous_window", rec.Suppressed, "flood", rec.Flood)
	}
	f.mu.Lock()
	sink := f.sink
	f.mu.Unlock()
	if sink == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sink(ctx, rec); err != nil && f.opts.Logger != nil {
		f.opts.Logger.Warn("failed login not recorded", "err", err)
	}
}

// Close stops the worker (records still queued are dropped).
func (f *FailedLogins) Close() {
	if f == nil {
		return
	}
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// ReasonMessage is the audit text of a record.
func (r FailedLogin) ReasonMessage() string {
	msg := fmt.Sprintf("%s from %s on %s", r.Message, r.Source, r.Surface)
	if r.Suppressed > 0 {
		msg += fmt.Sprintf(" (%d more from this source in its previous window)", r.Suppressed)
	}
	return msg
}
