package catalogmcp

import (
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/services/catalog/catalogconfig"
)

// masker replaces the secrets of one server's expanded configuration in
// text that leaves the catalog (log lines, Status.LastError, ListServers):
// the values of its env keys and of the variables it references whose names
// look like secrets (catalogconfig.IsSecretKey), every header value, the
// password of its URL and URL query values under secret-like names; and,
// whatever the configuration, `Bearer <token>` and `<secret-name>=<value>`
// shapes that a child prints to stderr. Values shorter than minSecretLen are
// not searched for (masking "1" or "on" everywhere would destroy the text;
// the shape rules still apply).
type masker struct {
	secrets []string // longest first
}

const minSecretLen = 4

var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+`),
	regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:token|secret|password|passwd|api[_-]?key|credential)[A-Za-z0-9_.-]*\s*[=:]\s*"?)[^\s"',;&]+`),
}

func newMasker(cfg catalogconfig.Server, vars map[string]string) *masker {
	m := &masker{}
	add := func(v string) {
		if len(v) >= minSecretLen {
			m.secrets = append(m.secrets, v)
		}
	}
	for k, v := range cfg.Env {
		if catalogconfig.IsSecretKey(k) {
			add(v)
		}
	}
	for k, v := range vars {
		if catalogconfig.IsSecretKey(k) {
			add(v)
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
		for k, vs := range u.Query() {
			if catalogconfig.IsSecretKey(k) {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
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
	for _, re := range secretShapes {
		s = re.ReplaceAllString(s, "${1}"+catalogconfig.Mask)
	}
	return s
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
