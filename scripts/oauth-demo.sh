#!/usr/bin/env bash
# Connecting OAuth-protected MCP servers, as an admin and as a user, against
# the local fixture (tests/oauthfixture: an OAuth 2.1 authorization server in
# front of a streamable-HTTP MCP server on loopback). Builds bin/toolplane,
# starts the fixture and the suite (auth on: an admin, alice and bob) in a
# temporary directory, runs the README's commands printing each one and its
# real output, plays the browser with `oauthfixture browse`, and stops
# everything. The README's "Connecting an OAuth-protected MCP server" is
# this script's output (`make oauth-demo`). Talks only to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
work=$(mktemp -d)
fixture="$work/oauthfixture"
go build -o "$fixture" ./tests/oauthfixture
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$fixture" >"$work/fixture.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q client_credentials "$work/fixture.out" && break; sleep 0.1; done
mcp=$(awk '/^mcp server:/ {print $3}' "$work/fixture.out")
as=$(awk '/^authorization server:/ {print $3}' "$work/fixture.out")
export REPORTS_CLIENT_SECRET=$(awk '/^client_credentials:/ {print $5}' "$work/fixture.out")
cc_id=$(awk '/^client_credentials:/ {gsub(",", "", $3); print $3}' "$work/fixture.out")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
grpc=127.0.0.1:$(free_port)
http=127.0.0.1:$(free_port)
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
ADMIN=admin-demo-token-0123 ALICE=alice-demo-token-0123 BOB=bob-demo-token-0123
head -c 32 /dev/urandom | base64 >"$work/oauth.key"
cat >"$work/extensions_config.json" <<JSON
{
  "mcpServers": {
    "docs": {"type": "http", "url": "$mcp"},
    "tracker": {"type": "http", "url": "$mcp", "session_scope": "per_user",
      "tools": [{"name": "whoami", "description": "Tell which tracker account the token belongs to", "inputSchema": {"type": "object"}}]},
    "reports": {"type": "http", "url": "$mcp",
      "oauth": {"enabled": true, "token_url": "$as/token", "grant_type": "client_credentials",
                "client_id": "$cc_id", "client_secret": "\${REPORTS_CLIENT_SECRET}", "scope": "tools"}}
  }
}
JSON
cat >"$work/toolplane.yaml" <<YAML
server:
  grpc_addr: $grpc
  http_addr: $http
  data_dir: $work/data
auth:
  enabled: true
  tokens:
    - {name: admin, sha256: $(sha $ADMIN), kind: user, subject: root, roles: [admin]}
    - {name: alice, sha256: $(sha $ALICE), kind: user, subject: alice, roles: [user]}
    - {name: bob, sha256: $(sha $BOB), kind: user, subject: bob, roles: [user]}
catalog:
  egress:
    allow: [127.0.0.0/8]
  extensions_config: $work/extensions_config.json
  oauth:
    public_url: http://$http
    key_file: $work/oauth.key
YAML
bin/toolplane serve --config "$work/toolplane.yaml" >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://$http/readyz" >/dev/null 2>&1 && break; sleep 0.2; done

# show prints a command as typed (tokens by name) and runs it.
show() { printf '$ %s\n' "$*" | sed -e "s|$work/||g"; }
tp() { # tp WHO ARGS...: the CLI with WHO's token
  local who=$1; shift
  local tok; case $who in admin) tok=$ADMIN;; alice) tok=$ALICE;; bob) tok=$BOB;; esac
  local shown=() a
  for a in "$@"; do case $a in *[\ {}]*) shown+=("'$a'");; *) shown+=("$a");; esac; done
  show "TOOLPLANE_TOKEN=\$${who^^}_TOKEN toolplane ${shown[*]}"
  TOOLPLANE_TOKEN=$tok bin/toolplane --grpc-addr "$grpc" "$@" 2>&1 | sed -e "s|$work/||g" || true
}
browse() { # browse URL USER
  show "(open the URL in a browser, sign in as $2, approve, then check and confirm Toolplane's page)"
  "$fixture" browse "$1" "$2"
}
connect_url() { # connect_url WHO ARGS...: the URL printed by servers connect
  local who=$1; shift
  local tok; case $who in admin) tok=$ADMIN;; alice) tok=$ALICE;; bob) tok=$BOB;; esac
  TOOLPLANE_TOKEN=$tok bin/toolplane --grpc-addr "$grpc" servers connect "$@" | tail -1
}

demo() {
echo "## fixture: MCP server $mcp, authorization server $as"
show cat extensions_config.json; sed -e "s|$REPORTS_CLIENT_SECRET|\${REPORTS_CLIENT_SECRET}|" "$work/extensions_config.json"
show cat toolplane.yaml; sed -e "s|$work/||g" "$work/toolplane.yaml"
tp admin servers list
tp admin servers connections --admin

echo; echo "## as an admin: the shared server docs"
tp admin servers connect docs --admin >"$work/connect.out"; cat "$work/connect.out"
browse "$(tail -1 "$work/connect.out")" admin@example.com
for _ in $(seq 50); do TOOLPLANE_TOKEN=$ADMIN bin/toolplane --grpc-addr "$grpc" servers list | grep -q '^docs .*READY' && break; sleep 0.2; done
tp admin servers list
show "curl -s -H \"Authorization: Bearer \$ADMIN_TOKEN\" -X POST http://$http/v1/tools/docs_whoami:call -d '{}'"
curl -s -H "Authorization: Bearer $ADMIN" -X POST "http://$http/v1/tools/docs_whoami:call" -d '{}'; echo

echo; echo "## as a user: the per_user server tracker (its declared tool is searchable before anyone connects)"
tp alice servers connections
th=$(TOOLPLANE_TOKEN=$ALICE bin/toolplane --grpc-addr "$grpc" threads create)
show 'TOOLPLANE_TOKEN=$ALICE_TOKEN toolplane threads create'; echo "$th"
tp alice threads call "$th" tool_search '{"query": "tracker account"}'
tp alice threads call "$th" tracker_whoami '{}'
tp alice servers connect tracker >"$work/connect.out"; cat "$work/connect.out"
browse "$(tail -1 "$work/connect.out")" alice@example.com
tp alice servers connections
tp alice threads call "$th" tracker_whoami '{}'
show "curl -s -H \"Authorization: Bearer \$BOB_TOKEN\" http://$http/v1/me/connections"
curl -s -H "Authorization: Bearer $BOB" "http://$http/v1/me/connections"; echo
tp bob servers connect docs
tp alice servers disconnect tracker
tp alice threads call "$th" tracker_whoami '{}'
tp admin servers disconnect docs --admin
}

demo | tee "$work/out"
# The walk-through is a check too (CI): each line below must be in it.
fail=0
expect() { grep -qF -- "$1" "$work/out" || { echo "oauth-demo: FAIL: missing: $1" >&2; fail=1; }; }
expect "reports  HTTP  READY"
expect "You are connecting the MCP server docs for all users"
expect "Toolplane: docs is connected (the shared connection, for every user)."
expect '"text":"admin@example.com"'
expect "status: ERROR (RUNTIME tool.needs_auth)"
expect "Toolplane: tracker is connected for the Toolplane user "
expect "alice@example.com"
# protojson varies its spacing from one build to the next: compare without spaces.
tr -d ' ' <"$work/out" | grep -qF '{"server":"tracker","session_scope":"SESSION_SCOPE_PER_USER","grant_type":"authorization_code","connected":false}' ||
  { echo "oauth-demo: FAIL: missing: bob's tracker connection (connected false)" >&2; fail=1; }
expect 'PermissionDenied: server "docs" is shared'
expect "disconnected tracker"
[ "$(grep -c 'tool.needs_auth' "$work/out")" -ge 2 ] || { echo "oauth-demo: FAIL: the call after disconnecting was not tool.needs_auth" >&2; fail=1; }
[ "$(awk '/tracker_whoami .\{\}./ {getline; print}' "$work/out" | grep -c SUCCESS)" -eq 1 ] || { echo "oauth-demo: FAIL: want exactly one successful tracker_whoami (after connecting)" >&2; fail=1; }
[ $fail -eq 0 ] && echo "oauth-demo: ok" >&2
exit $fail
