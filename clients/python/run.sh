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
  "$root/scripts/install-npm.sh" >/dev/null
  (cd "$root" && make -s build)
  npm_dir="$root/.tools/npm/node_modules/@modelcontextprotocol"
  cat >"$work/extensions_config.json" <<JSON
{"mcpServers": {
  "everything": {"command": "node", "args": ["$npm_dir/server-everything/dist/index.js", "stdio"]},
  "memory": {"command": "node", "args": ["$npm_dir/server-memory/dist/index.js"], "env": {"MEMORY_FILE_PATH": "$work/memory.jsonl"}}
}}
JSON
  sed -n '/^auth:/,/^catalog:/p' "$root/examples/toolplane.yaml" | sed '$d' >"$work/toolplane.yaml"
  printf 'catalog:\n  extensions_config: %s\nauthz:\n  policy_file: %s\n' "$work/extensions_config.json" "$root/examples/policy.csv" >>"$work/toolplane.yaml"
  port() { "$py" -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
  gport=$(port); hport=$(port)
  mkdir -p "$work/data"
  "$root/bin/toolplane" serve --config "$work/toolplane.yaml" --grpc-addr "127.0.0.1:$gport" \
    --http-addr "127.0.0.1:$hport" --data-dir "$work/data" 2>"$work/toolplane.log" &
  pid=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  export TOOLPLANE_GRPC="127.0.0.1:$gport" TOOLPLANE_HTTP="127.0.0.1:$hport"
fi
PYTHONDONTWRITEBYTECODE=1 "$py" "$root/clients/python/walkthrough.py"
