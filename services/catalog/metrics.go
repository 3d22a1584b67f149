package catalog

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/toolplane/toolplane/services/catalog/catalogmcp"
)

// metrics are the catalog's Prometheus collectors (registered on
// svckit.Env.Metrics when set):
//
//	toolplane_catalog_tools                          gauge: tools in the catalog
//	toolplane_catalog_server_ready{server}           gauge: 1 when READY, else 0
//	toolplane_catalog_server_restarts{server}        gauge: restarts since start
//	toolplane_catalog_tool_calls_total{server,code}  counter: calls by gRPC code
//	toolplane_catalog_tool_call_seconds{server}      histogram: call latency
//	toolplane_catalog_names_evicted_total{server}    counter: retained names evicted by catalog.max_names_per_server
//	toolplane_catalog_definition_churn_total{server} counter: tools found changing their definition on every list (churn.go)
//	toolplane_catalog_sessions_evicted_total{reason} counter: per-scope MCP sessions closed by the pool, or refused (catalogmcp/pool.go)
type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	evicted  *prometheus.CounterVec
	churned  *prometheus.CounterVec
	// sessions counts the scoped-session pool's evictions by reason:
	// capacity, tenant_cap, idle, refused_tenant_cap (catalogmcp.Evict*).
	sessions *prometheus.CounterVec
	// views counts SearchTools requests by candidate view outcome
	// (views.go): "sent" (names given, the view stored or found), "hit" (an
	// id stood for the names), "unknown" (an id the catalog did not know).
	views *prometheus.CounterVec
}

var (
	descTools    = prometheus.NewDesc("toolplane_catalog_tools", "Tools in the catalog.", nil, nil)
	descReady    = prometheus.NewDesc("toolplane_catalog_server_ready", "1 when the MCP server is READY, else 0.", []string{"server"}, nil)
	descRestarts = prometheus.NewDesc("toolplane_catalog_server_restarts", "Restarts of the MCP server since the catalog started.", []string{"server"}, nil)
)

// stateCollector reports the snapshot's figures at scrape time.
type stateCollector struct{ s *Server }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTools
	ch <- descReady
	ch <- descRestarts
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.snap.Load()
	ch <- prometheus.MustNewConstMetric(descTools, prometheus.GaugeValue, float64(len(snap.tools)))
	for _, st := range snap.statuses {
		ready := 0.0
		if st.State == catalogmcp.StateReady {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready, st.Name)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.GaugeValue, float64(st.Restarts), st.Name)
	}
}

func newMetrics(s *Server, reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_catalog_tool_calls_total",
			Help: "Tool calls by server and gRPC status code."}, []string{"server", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolplane_catalog_tool_call_seconds",
			Help: "Tool call latency by server.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"server"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_catalog_names_evicted_total",
			Help: "Retained tool name assignments evicted because the server was over catalog.max_names_per_server."}, []string{"server"}),
		churned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_catalog_definition_churn_total",
			Help: "Tools whose definition changed catalog.definition_churn.changes times within its window; their last stable definition stays bound."}, []string{"server"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_catalog_sessions_evicted_total",
			Help: "Per-scope MCP sessions closed by the pool by reason: capacity (catalog.sessions.max_scoped, largest tenant first), tenant_cap (catalog.sessions.max_scoped_per_tenant), idle (catalog.sessions.idle_ttl), refused_tenant_cap (a new session refused, the tenant's all in use)."}, []string{"reason"}),
		views: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_catalog_search_views_total",
			Help: "SearchTools requests of service callers by candidate view outcome: sent (names given), hit (id known), unknown (id not known)."}, []string{"outcome"}),
	}
	if reg == nil {
		return m
	}
	for _, c := range []prometheus.Collector{m.calls, m.duration, m.evicted, m.churned, m.sessions, m.views, stateCollector{s}} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				s.log.Warn("catalog: metrics not registered", "err", err)
			}
		}
	}
	return m
}

func (m *metrics) observeView(outcome string) {
	if m != nil {
		m.views.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) observeCall(server string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server, status.Code(err).String()).Inc()
	m.duration.WithLabelValues(server).Observe(time.Since(start).Seconds())
}

// observeEvicted counts retained names evicted for server.
func (m *metrics) observeEvicted(server string, n int) {
	if m == nil {
		return
	}
	m.evicted.WithLabelValues(server).Add(float64(n))
}

// observeSessionEvicted counts one eviction (or refusal) of the scoped
// session pool; it runs under the pool's lock (a counter increment).
func (m *metrics) observeSessionEvicted(reason string) {
	if m != nil {
		m.sessions.WithLabelValues(reason).Inc()
	}
}
