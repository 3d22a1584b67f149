// Package version holds the build version, set with
// -ldflags "-X github.com/toolplane/toolplane/internal/version.Version=...".
package version

import "runtime/debug"

// Version is the release version or "dev".
var Version = "dev"

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
