#!/usr/bin/env bash
# Installs the official MCP inspector (npm @modelcontextprotocol/inspector,
# pinned) into .tools/inspector (git-ignored); it runs on the Node 22 of
# .tools/conformance (it wants node >= 22.19). Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
INSPECTOR_VERSION=2.12.0
dir="$root/.tools/inspector"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"toolplane-inspector","private":true}' > package.json
got=$(node -e "try{console.log(require('./node_modules/@modelcontextprotocol/inspector/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ "$got" != "$INSPECTOR_VERSION" ]; then
  npm install --no-audit --no-fund --loglevel=error "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"
fi
echo "inspector $INSPECTOR_VERSION ready in $dir"
