package catalogmcp

import (
	"context"
	"log/slog"
	"net/url"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/internal/observability"
	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// masker replaces the secrets of one server's expanded configuration in
// text that leaves the catalog (log lines, Status.LastError, ListServers,
// WatchCatalog, call errors): the value of every `${VAR}` it references and
// every env value, every header value (and the token after "Bearer "), its
// URL's password and every URL query value, and its OAuth client secret and
// extra token parameters; and, whatever the configuration, `Bearer <token>`
// and `<secret-name>=<value>` shapes that a child prints to stderr. A value
// under a secret-like name (catalogconfig.IsSecretKey) is masked from
// observability.MinSecretLen bytes; any other from minPlainLen bytes and
// unless it is a path (starts with "/" or "."), so that words such as
// "warning" and the operator's directories stay readable. The values read
// from the environment are also registered with observability.Secrets,
// which masks every log line and gRPC error text of the process
// (docs/architecture.md §5); the server's own log lines, including its
// transport's, pass through this masker (maskHandler).
type masker struct {
	secrets []string // longest first
	// fromEnv are the values read from the suite's environment (`${VAR}`),
	// the ones registered with observability.Secrets: a value written in the
	// configuration itself is masked in this server's own texts only, so
	// that whoever writes a server cannot make every log line of the
	// process hide a chosen text.
	fromEnv []string
	// inResults are secrets and their JSON escapings, longest first, for
	// results (maskresult.go).
	inResults []string
}

// minPlainLen is the shortest value under a name that does not look secret
// the masker searches for.
const minPlainLen = 8

func newMasker(cfg catalogconfig.Server, vars map[string]string, oauth *catalogconfig.OAuth) *masker {
	m := &masker{}
	add := func(v string) {
		if len(v) >= observability.MinSecretLen {
			m.secrets = append(m.secrets, v)
		}
	}
	plain := func(v string) {
		if len(v) >= minPlainLen && !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, ".") {
			add(v)
		}
	}
	named := func(k, v string) {
		if catalogconfig.IsSecretKey(k) {
			add(v)
		} else {
			plain(v)
		}
	}
	for k, v := range cfg.Env {
		named(k, v)
	}
	for k, v := range vars {
		if k != catalogconfig.ScopeDirVar {
			n := len(m.secrets)
			named(k, v)
			m.fromEnv = append(m.fromEnv, m.secrets[n:]...)
		}
	}
	for _, v := range cfg.Headers {
		add(v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(tok) // "Bearer <token>": the token alone
		}
	}
	if u, err := url.Parse(cfg.URL); err == nil {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
				if e := url.QueryEscape(v); e != v {
					add(e) // as it appears inside the URL
				}
			}
		}
	}
	if oauth != nil {
		add(oauth.ClientSecret)
		for _, v := range oauth.ExtraTokenParams {
			add(v)
		}
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
	m.inResults = resultValues(m.secrets)
	return m
}

// mask returns s with every secret replaced by catalogconfig.Mask.
func (m *masker) mask(s string) string {
	if s == "" {
		return s
	}
	if m != nil {
		for _, v := range m.secrets {
			s = strings.ReplaceAll(s, v, catalogconfig.Mask)
		}
	}
	return observability.MaskShapes(s)
}

// logger returns the supervisor's logger tagged with the server name and type.
func (s *Supervisor) logger() *slog.Logger {
	l := s.opts.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("server", s.raw.Name, "type", s.st.Type)
}

// maskedError is err with its text masked; Unwrap keeps errors.As working.
type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// maskErr returns err with the server's secrets masked in its text (err
// itself when nothing was masked).
func (s *Supervisor) maskErr(err error) error {
	if err == nil {
		return nil
	}
	msg := s.mask.mask(err.Error())
	if msg == err.Error() {
		return err
	}
	return &maskedError{err: err, msg: msg}
}

// maskHandler masks the message and every attribute value of the records
// of one server's logger (its supervisor's lines and its transport's own).
type maskHandler struct {
	inner slog.Handler
	m     *masker
}

func (h maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.m.mask(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h maskHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		masked := make([]any, len(g))
		for i, x := range g {
			masked[i] = h.attr(x)
		}
		return slog.Group(a.Key, masked...)
	}
	if v.Kind() == slog.KindString || v.Kind() == slog.KindAny {
		if s := v.String(); h.m.mask(s) != s {
			return slog.String(a.Key, h.m.mask(s))
		}
	}
	return a
}

func (h maskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = h.attr(a)
	}
	return maskHandler{inner: h.inner.WithAttrs(masked), m: h.m}
}

func (h maskHandler) WithGroup(name string) slog.Handler {
	return maskHandler{inner: h.inner.WithGroup(name), m: h.m}
}
