// Package version holds the build version, set with
// -ldflags "-X github.com/toolplane/toolplane/internal/version.Version=...".
package version

import "runtime/debug"

// Version is the release version or "dev".
var Version = "dev"

// Release is the last released version of the contracts (CHANGELOG.md's
// newest entry, the commit in RELEASE_BASELINE); the served OpenAPI spec
// carries it as info.version (internal/openapispec).
const Release = "0.1.0"

// String returns the version with the VCS revision when the build recorded one.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
