package skills

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
)

// metrics are the service's Prometheus collectors.
type metrics struct {
	// writes counts install, edit, rollback, enable, disable and delete
	// outcomes: result is ok, refused (archive/frontmatter), blocked (scan) or error.
	writes *prometheus.CounterVec
	// scanSeconds observes deterministic scan durations.
	scanSeconds prometheus.Histogram
	// findings counts scan findings by severity.
	findings *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_skills_writes_total",
			Help: "Skill writes by operation and result (ok, refused, blocked, error)."}, []string{"op", "result"}),
		scanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "toolplane_skills_scan_seconds",
			Help: "Duration of deterministic skill scans.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_skills_scan_findings_total",
			Help: "Scan findings by severity."}, []string{"severity"}),
	}
	if reg != nil {
		m.writes = register(reg, m.writes)
		m.scanSeconds = register(reg, m.scanSeconds)
		m.findings = register(reg, m.findings)
	}
	return m
}

// register registers c, reusing an identical collector already registered
// (several servers in one process, e.g. tests).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) scanned(start time.Time, rep skillsscan.Report) {
	m.scanSeconds.Observe(time.Since(start).Seconds())
	for sev, n := range rep.Counts {
		m.findings.WithLabelValues(string(sev)).Add(float64(n))
	}
}

// write records the outcome of a write operation.
func (m *metrics) write(op string, err error) {
	result := "ok"
	if err != nil {
		st := status.Convert(toStatus(err))
		result = "refused"
		if st.Code() == codes.Internal {
			result = "error"
		}
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED.String() {
				result = "blocked"
			}
		}
	}
	m.writes.WithLabelValues(op, result).Inc()
}
