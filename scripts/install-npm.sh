#!/usr/bin/env bash
# Installs the pinned npm packages the tests and the example use into .tools/ (git-ignored).
# Idempotent: a package already at its pinned version is not fetched again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.tools/npm"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"toolplane-test-deps","private":true}' > package.json
pkgs=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-sequential-thinking@2026.8.31"
  "@modelcontextprotocol/server-github@2025.4.8"
  "@notionhq/notion-mcp-server@2.5.2"
  "@playwright/mcp@0.0.83"
  "@upstash/context7-mcp@4.1.1"
  "@kazuph/mcp-taskmanager@1.1.1"
  "@cyanheads/git-mcp-server@2.15.3"
)
need=0
for p in "${pkgs[@]}"; do
  name=${p%@*}; ver=${p##*@}
  got=$(node -e "try{console.log(require('./node_modules/$name/package.json').version)}catch(e){}" 2>/dev/null || true)
  [ "$got" = "$ver" ] || need=1
done
if [ "$need" = 1 ]; then
  npm install --no-audit --no-fund --loglevel=error "${pkgs[@]}"
fi
echo "npm MCP servers ready in $dir/node_modules"
