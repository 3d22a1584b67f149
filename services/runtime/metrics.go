package runtime

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the runtime's own collectors (registered on env.Metrics).
type metrics struct {
	// upstream: latency of upstream calls by service, method, code.
	upstream *prometheus.HistogramVec
	// toolCalls: tool calls by source, status and error kind.
	toolCalls *prometheus.CounterVec
	// assemblies: AssembleTools by outcome (ok, cached, failed).
	assemblies *prometheus.CounterVec
	// failOpen: listings that proceeded unfiltered because authz was
	// unreachable and runtime.authz.fail_open_listing is on.
	failOpen prometheus.Counter
	// promotions: names promoted, by origin (tool_search, routing).
	promotions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolplane_runtime_upstream_seconds",
			Help: "Latency of runtime calls to catalog, authz and skills.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)},
			[]string{"upstream", "method", "code"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_tool_calls_total",
			Help: "Tool calls executed by the runtime, by source, status and error kind."}, []string{"source", "status", "error_kind"}),
		assemblies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_assemblies_total",
			Help: "AssembleTools runs by outcome."}, []string{"outcome"}),
		failOpen: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolplane_runtime_authz_fail_open_total",
			Help: "Tool listings that proceeded unfiltered because authz was unreachable (runtime.authz.fail_open_listing)."}),
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolplane_runtime_promotions_total",
			Help: "Tool names promoted, by origin."}, []string{"origin"}),
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for _, c := range []prometheus.Collector{m.upstream, m.toolCalls, m.assemblies, m.failOpen, m.promotions} {
		if err := reg.Register(c); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				_ = are // a second runtime in one registry (tests) shares the collectors
				continue
			}
		}
	}
	return m
}
