#!/usr/bin/env bash
# The example as the split topology on one machine: four `toolplane serve`
# processes (catalog, authz, skills, runtime), each with its own data
# directory under data/split/, the runtime reaching the other three over gRPC
# with the service token of examples/split/service-token. Clients use the
# runtime at the usual addresses: gRPC 127.0.0.1:7420, HTTP (REST, /mcp)
# 127.0.0.1:7421. Ctrl-C stops all four. The same shape in containers:
# deploy/compose.split.yaml and deploy/k8s.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-npm.sh
make -s build
export TOOLPLANE_NPM_DIR="$PWD/.tools/npm"
export TOOLPLANE_DEMO_FILES="$PWD/examples/demo-files"
export TOOLPLANE_DATA_DIR="$PWD/data/split/catalog"
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; }
trap stop EXIT INT TERM
for svc in catalog authz skills runtime; do
  mkdir -p "data/split/$svc"
  bin/toolplane serve --config "examples/split/$svc.yaml" 2> >(sed "s/^/[$svc] /" >&2) &
  pids+=($!)
  if [ "$svc" = skills ]; then sleep 1; fi # the runtime starts after its upstreams listen
done
wait
