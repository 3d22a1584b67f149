#!/usr/bin/env bash
# The walk-through over REST with curl (and jq): create a thread, assemble
# (few schemas bound, many names deferred), a deferred call refused,
# tool_search, the promoted call succeeding, a write tool working for the
# editor and denied for the viewer. Every step is checked; exit 0 = all held.
#
#   scripts/walkthrough-curl.sh                      # starts its own suite (bin/toolplane,
#                                                    # server-everything + server-memory, demo tokens)
#   TOOLPLANE_HTTP=http://127.0.0.1:7421 scripts/walkthrough-curl.sh   # against `make demo`
#
# Tokens: $EDITOR_TOKEN (default tp-demo-editor) and $VIEWER_TOKEN
# (default tp-demo-viewer), the demo tokens of examples/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EDITOR_TOKEN=${EDITOR_TOKEN:-tp-demo-editor}
VIEWER_TOKEN=${VIEWER_TOKEN:-tp-demo-viewer}
ADMIN_TOKEN=${ADMIN_TOKEN:-tp-demo-admin}
command -v jq >/dev/null || { echo "walkthrough-curl: jq is required" >&2; exit 2; }

pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${TOOLPLANE_HTTP:-}" ]; then
  . "$root/scripts/lib/walkthrough-suite.sh"
  start_walkthrough_suite "$root" "$work"
  TOOLPLANE_HTTP=$suite_http
fi
H=$TOOLPLANE_HTTP

# post TOKEN PATH JSON: one REST call; prints the response body, fails on HTTP errors.
post() { curl -sS --fail-with-body -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -X POST "$H$2" -d "$3"; }
call() { post "$1" "/v1/threads/$2:executeToolCall" "{\"tool_call\":{\"id\":\"$3\",\"name\":\"$4\",\"arguments\":$5}}"; }
passed=0
check() { if eval "$2"; then echo "  ok: $1"; passed=$((passed + 1)); else echo "  FAILED: $1" >&2; echo "walkthrough-curl: $passed passed, 1 failed"; exit 1; fi; }
step() { echo; echo "== $*"; }

# The MCP servers connect in the background: wait until the two the
# walk-through uses are READY (listing servers needs an admin credential).
for _ in $(seq 1 150); do
  n=$(curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$H/v1/servers" 2>/dev/null |
    jq '[.servers[]? | select((.config.name == "everything" or .config.name == "memory") and .state == "SERVER_STATE_READY")] | length' 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 2 ] 2>/dev/null && break
  sleep 0.2
done

step "1. create a thread (editor)"
thread=$(post "$EDITOR_TOKEN" /v1/threads '{}' | jq -r .thread.thread_id)
echo "  thread $thread"
check "thread created" '[ -n "$thread" ] && [ "$thread" != null ]'

step "2. assemble the first turn"
asm=$(post "$EDITOR_TOKEN" "/v1/threads/$thread:assemble" '{"user_message":"hello"}')
echo "$asm" | jq -c '{bound: [.tools[].name], deferred: (.deferred | length), catalog_hash}'
check "tool_search is bound" '[ "$(echo "$asm" | jq '"'"'[.tools[].name] | index("tool_search") != null'"'"')" = true ]'
check "everything_get-sum is deferred, not bound" '[ "$(echo "$asm" | jq '"'"'(.deferred | index("everything_get-sum") != null) and ([.tools[].name] | index("everything_get-sum") == null)'"'"')" = true ]'

step "3. call a deferred tool before tool_search: refused, not run"
r=$(call "$EDITOR_TOKEN" "$thread" c1 everything_get-sum '{"a":2,"b":3}')
echo "$r" | jq -c '.result | {status, error_kind, reason_code, text: .content[0].text}'
check "refused with deferred.not_promoted" '[ "$(echo "$r" | jq -r .result.reason_code)" = deferred.not_promoted ]'

step "4. tool_search promotes"
r=$(call "$EDITOR_TOKEN" "$thread" c2 tool_search '{"query":"select:everything_get-sum,memory_create_entities"}')
echo "$r" | jq -c '.result | {status, promoted}'
check "everything_get-sum promoted" '[ "$(echo "$r" | jq '"'"'.result.promoted.names | index("everything_get-sum") != null'"'"')" = true ]'

step "5. the promoted call succeeds"
r=$(call "$EDITOR_TOKEN" "$thread" c3 everything_get-sum '{"a":2,"b":3}')
echo "$r" | jq -c '.result | {status, text: .content[0].text}'
check "2 + 3 = 5" '[ "$(echo "$r" | jq -r .result.content[0].text)" = "The sum of 2 and 3 is 5." ]'
r=$(call "$EDITOR_TOKEN" "$thread" c4 memory_create_entities '{"entities":[{"name":"walkthrough","entityType":"test","observations":["created by curl"]}]}')
echo "$r" | jq -c '.result | {status, name}'
check "the editor may write (memory_create_entities)" '[ "$(echo "$r" | jq -r .result.status)" = TOOL_CALL_STATUS_SUCCESS ]'

step "6. the viewer: write tools are neither listed nor callable"
vthread=$(post "$VIEWER_TOKEN" /v1/threads '{}' | jq -r .thread.thread_id)
asm=$(post "$VIEWER_TOKEN" "/v1/threads/$vthread:assemble" '{"user_message":"hello"}')
check "memory_create_entities not in the viewer's deferred set" '[ "$(echo "$asm" | jq '"'"'.deferred | index("memory_create_entities") == null'"'"')" = true ]'
r=$(call "$VIEWER_TOKEN" "$vthread" c5 memory_create_entities '{"entities":[]}')
echo "$r" | jq -c '.result | {status, error_kind, reason_code, text: .content[0].text}'
# A policy decision (authz.denied, authz.condition_failed, ...), not an authz failure.
check "denied by authz" 'case "$(echo "$r" | jq -r .result.reason_code)" in authz.evaluator_error) false;; authz.*) true;; *) false;; esac'

echo
echo "walkthrough-curl: $passed passed, 0 failed"
