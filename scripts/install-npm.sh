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
  if [ -t 2 ]; then
    # On a terminal: say what is happening and let npm draw its progress.
    echo "installing ${#pkgs[@]} pinned npm MCP servers into $dir (the first time takes a minute or two)..." >&2
    npm install --no-audit --no-fund --progress=true --loglevel=notice "${pkgs[@]}"
  else
    # Piped or in CI: quiet unless something fails.
    npm install --no-audit --no-fund --progress=false --loglevel=error "${pkgs[@]}"
  fi
fi
echo "npm MCP servers ready in $dir/node_modules"
