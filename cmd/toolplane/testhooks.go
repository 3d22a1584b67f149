package main

import "github.com/toolplane/toolplane/internal/app"

// serveOptions lets files compiled in only under a build tag adjust the
// process-level options of `toolplane serve` before app.Run (the e2e build
// adds a test-only gRPC service, see testonly_e2e.go). In a normal build it
// returns o unchanged.
var serveOptions = func(o app.Options) app.Options { return o }
