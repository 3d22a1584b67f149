#!/usr/bin/env bash
# The main job: installs what is missing (the pinned npm MCP servers, into
# .tools/, git-ignored), builds bin/toolplane and runs the all-in-one suite on
# the example configuration with real MCP servers. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-npm.sh
make -s build
export TOOLPLANE_NPM_DIR="$PWD/.tools/npm"
export TOOLPLANE_DEMO_FILES="$PWD/examples/demo-files"
export TOOLPLANE_DATA_DIR="$PWD/data/demo"
mkdir -p "$TOOLPLANE_DATA_DIR"
exec bin/toolplane serve --config examples/toolplane.yaml "$@"
