#!/usr/bin/env bash
# Runs the Python walk-through (walkthrough.py) over gRPC with Debian's
# /usr/bin/python3, python3-grpcio and python3-protobuf (apt-installed by
# .ci/run when missing) on the stubs generated into toolplane_client/gen.
# Without TOOLPLANE_GRPC it starts its own suite (bin/toolplane with
# server-everything and server-memory, the example's demo tokens and policy)
# and stops it afterwards.
#
#   clients/python/run.sh
#   TOOLPLANE_GRPC=127.0.0.1:7420 TOOLPLANE_HTTP=127.0.0.1:7421 clients/python/run.sh   # against `make demo`
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
if ! "$py" -c 'import grpc, google.protobuf' 2>/dev/null; then
  echo "walkthrough-python: $py lacks grpc/protobuf (apt-get install python3-grpcio python3-protobuf)" >&2
  exit 1
fi
pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${TOOLPLANE_GRPC:-}" ]; then
  . "$root/scripts/lib/walkthrough-suite.sh"
  PY=$py start_walkthrough_suite "$root" "$work"
  export TOOLPLANE_GRPC=$suite_grpc TOOLPLANE_HTTP=${suite_http#http://}
fi
PYTHONDONTWRITEBYTECODE=1 "$py" "$root/clients/python/walkthrough.py"
