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
if [ -t 2 ]; then
  echo "starting the suite: each MCP server logs CONNECTING, then READY (with its tool count) or FAILED;" >&2
  echo "the line \"serving\" comes once every server is past its first attempt (catalog.ready_requires: all)." >&2
fi
exec bin/toolplane serve --config examples/toolplane.yaml "$@"
