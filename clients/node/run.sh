#!/usr/bin/env bash
# Runs the Node.js walk-through (walkthrough.js) over gRPC. Installs the two
# npm dependencies into .tools/node-client; without TOOLPLANE_GRPC it starts
# its own suite (bin/toolplane with server-everything and server-memory, the
# example's demo tokens and policy) and stops it afterwards.
#
#   clients/node/run.sh
#   TOOLPLANE_GRPC=127.0.0.1:7420 clients/node/run.sh     # against `make demo`
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/clients/node/install.sh" >/dev/null
pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${TOOLPLANE_GRPC:-}" ]; then
  . "$root/scripts/lib/walkthrough-suite.sh"
  start_walkthrough_suite "$root" "$work"
  export TOOLPLANE_GRPC=$suite_grpc
fi
NODE_PATH="$root/.tools/node-client/node_modules" node "$root/clients/node/walkthrough.js"
