//go:build pprofbench

// Profiling of the real binary under the bench/e2e load
// (docs/performance.md "Cheaper hops"): built only with `-tags pprofbench`,
// and then listening only when TOOLPLANE_PPROF_ADDR names an address. No
// release or test build includes it.

package main

import (
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"time"
)

func init() {
	if addr := os.Getenv("TOOLPLANE_PPROF_ADDR"); addr != "" {
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
	}
}
