package observability

import (
	"encoding/json"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/status"
)

// MaskText is the placeholder shown instead of a secret.
const MaskText = "***"

// MinSecretLen is the shortest value a Masker searches for: masking "1" or
// "on" everywhere would destroy the text (the shape rules still apply).
const MinSecretLen = 4

// Masker is the one masking facility of the process (docs/architecture.md
// §5, "Secrets stay secret"): components register the secret values they
// hold (the catalog: each MCP server's `${VAR}` values, env values, header
// values, URL passwords and query values), and the boundaries where text
// leaves the process pass it through Mask — every log line (NewLogger's
// writer) and every gRPC error message (grpcx's interceptors, so REST
// errors too). Besides the registered values it masks `Bearer <token>` and
// `<secret-name>=<value>` shapes whatever registered them.
type Masker struct {
	mu     sync.RWMutex
	owners map[string][]string
	r      *strings.Replacer // nil: nothing registered
}

// Secrets is the process's Masker.
var Secrets = &Masker{}

var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+`),
	regexp.MustCompile(`(?i)(\b[A-Za-z0-9_.-]*(?:token|secret|password|passwd|api[_-]?key|credential)[A-Za-z0-9_.-]*\s*[=:]\s*"?)[^\s"',;&]+`),
}

// Set replaces the secrets registered by owner (nil or empty removes them).
// Values shorter than MinSecretLen are ignored.
func (m *Masker) Set(owner string, secrets []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owners == nil {
		m.owners = map[string][]string{}
	}
	var keep []string
	for _, s := range secrets {
		if len(s) >= MinSecretLen {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		delete(m.owners, owner)
	} else {
		m.owners[owner] = keep
	}
	m.rebuildLocked()
}

func (m *Masker) rebuildLocked() {
	seen := map[string]bool{}
	var all []string
	add := func(v string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			all = append(all, v)
		}
	}
	for _, vs := range m.owners {
		for _, v := range vs {
			add(v)
			// The escaped spellings a JSON or text log line, or a quoted
			// error, gives a value with quotes, backslashes or control bytes.
			if b, err := json.Marshal(v); err == nil {
				add(string(b[1 : len(b)-1]))
			}
			q := strconv.Quote(v)
			add(q[1 : len(q)-1])
		}
	}
	if len(all) == 0 {
		m.r = nil
		return
	}
	// Longest first, so a secret containing another is masked whole.
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, MaskText)
	}
	m.r = strings.NewReplacer(pairs...)
}

// Mask returns s with every registered secret and every secret shape
// replaced by MaskText.
func (m *Masker) Mask(s string) string {
	if s == "" {
		return s
	}
	m.mu.RLock()
	r := m.r
	m.mu.RUnlock()
	if r != nil {
		s = r.Replace(s)
	}
	return MaskShapes(s)
}

// MaskShapes masks only the `Bearer <token>` and `<secret-name>=<value>`
// shapes of s.
func MaskShapes(s string) string {
	for _, re := range secretShapes {
		s = re.ReplaceAllString(s, "${1}"+MaskText)
	}
	return s
}

// MaskError returns err with its text masked: a gRPC status keeps its code
// and details with the message masked; another error keeps errors.Is/As
// through Unwrap. err itself when nothing changed.
func (m *Masker) MaskError(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		msg := m.Mask(st.Message())
		if msg == st.Message() {
			return err
		}
		p := st.Proto()
		p.Message = msg
		return status.FromProto(p).Err()
	}
	msg := m.Mask(err.Error())
	if msg == err.Error() {
		return err
	}
	return &maskedError{err: err, msg: msg}
}

type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// Writer returns w with every write masked (one log record per write, as
// slog's handlers do). It reports len(p) written on success.
func (m *Masker) Writer(w io.Writer) io.Writer { return &maskWriter{m: m, w: w} }

type maskWriter struct {
	m *Masker
	w io.Writer
}

func (mw *maskWriter) Write(p []byte) (int, error) {
	out := mw.m.Mask(string(p))
	if _, err := io.WriteString(mw.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}
