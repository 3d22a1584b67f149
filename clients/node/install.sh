#!/usr/bin/env bash
# Installs the Node client's two dependencies (pinned in package.json) into
# .tools/node-client/node_modules (git-ignored). Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/.tools/node-client"
mkdir -p "$dir"
cp "$root/clients/node/package.json" "$dir/package.json"
cd "$dir"
have() { node -e "try{console.log(require('./node_modules/$1/package.json').version)}catch(e){}" 2>/dev/null || true; }
if [ "$(have @grpc/grpc-js)" != 1.14.7 ] || [ "$(have @grpc/proto-loader)" != 0.8.1 ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
echo "node client dependencies ready in $dir/node_modules"
