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
  port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
  gport=$(port); hport=$(port)
  mkdir -p "$work/data"
  "$root/bin/toolplane" serve --config "$work/toolplane.yaml" --grpc-addr "127.0.0.1:$gport" \
    --http-addr "127.0.0.1:$hport" --data-dir "$work/data" 2>"$work/toolplane.log" &
  pid=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  export TOOLPLANE_GRPC="127.0.0.1:$gport"
fi
NODE_PATH="$root/.tools/node-client/node_modules" node "$root/clients/node/walkthrough.js"
