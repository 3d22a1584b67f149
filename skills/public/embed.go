// Package public holds the public skills shipped with Toolplane
// (docs/deerflow.md §4.1 category "public"): read-only, enabled globally by
// default, embedded into the binary. Each sub-folder is one skill whose name
// equals the folder name; the skills service loads them at start, validates
// them strictly and scans them (a shipped skill with a CRITICAL finding fails
// the package tests, not production).
package public

import "embed"

// FS holds every skill folder (each with a SKILL.md at its root); the
// pattern */* embeds the folders' contents and leaves this package's Go
// files out.
//
//go:embed */*
var FS embed.FS
