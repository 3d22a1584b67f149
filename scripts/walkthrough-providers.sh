#!/usr/bin/env bash
# The provider walk-through (README, "Calling a provider yourself"): an
# application that calls the model provider itself uses Toolplane for its
# tools through AssembleTools + ExecuteToolCall, once per provider profile —
# anthropic_messages (defer_loading + tool_reference), openai_responses
# (defer_loading + client-executed tool_search / tool_search_output) and
# openai_chat (tool_search as a function) — each against the strict local
# fake of that provider, which fails the run on any request it refuses.
#
#   scripts/walkthrough-providers.sh                  # starts its own suite (bin/toolplane,
#                                                     # server-everything + server-memory, demo tokens)
#   TOOLPLANE_HTTP=http://127.0.0.1:7421 scripts/walkthrough-providers.sh   # against `make demo`
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EDITOR_TOKEN=${EDITOR_TOKEN:-tp-demo-editor}
ADMIN_TOKEN=${ADMIN_TOKEN:-tp-demo-admin}
command -v jq >/dev/null || { echo "walkthrough-providers: jq is required" >&2; exit 2; }

pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The driver (the application's side, with the provider fakes in-process).
(cd "$root" && go build -o "$work/walkthrough-providers" ./scripts/walkthrough-providers)

if [ -z "${TOOLPLANE_HTTP:-}" ]; then
  . "$root/scripts/lib/walkthrough-suite.sh"
  start_walkthrough_suite "$root" "$work"
  TOOLPLANE_HTTP=$suite_http
fi

# The MCP servers connect in the background: wait until both are READY (the
# deferred set, and so the output, is then the same on every run).
for _ in $(seq 1 150); do
  n=$(curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$TOOLPLANE_HTTP/v1/servers" 2>/dev/null |
    jq '[.servers[]? | select((.config.name == "everything" or .config.name == "memory") and .state == "SERVER_STATE_READY")] | length' 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 2 ] 2>/dev/null && break
  sleep 0.2
done

"$work/walkthrough-providers" -http "$TOOLPLANE_HTTP" -token "$EDITOR_TOKEN" "$@"
