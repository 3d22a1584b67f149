// Package runtimeassembly is the runtime's assembly pipeline
// (docs/architecture.md §3.1): which tools a thread's next model call
// sees. Builder builds the base assembly per principal and agent (sources,
// tool groups, authz listing, deferral and the catalog's hash; cached
// while the catalog and policy watch streams are live), the per-thread
// View on top of it (promotions under the hash, the active skills'
// policy), and runs the AssembleTools use case (slash activation, routing
// auto-promotions, prompt sections). The tool-call chain
// (services/runtime/runtimechain) reads the same View, so a call is
// decided on exactly what the model was shown.
//
// It reaches catalog, authz and skills only through their generated gRPC
// clients.
package runtimeassembly
