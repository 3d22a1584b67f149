# Sourced by the walk-throughs (scripts/walkthrough-curl.sh,
# scripts/walkthrough-providers.sh, clients/node/run.sh, clients/python/run.sh):
# start_walkthrough_suite ROOT WORK starts the all-in-one suite of bin/toolplane
# on two free loopback ports with server-everything and server-memory, the
# example's auth section (demo tokens) and policy, waits for /readyz, and sets
#   pid        the serve process (the caller's cleanup kills it)
#   suite_grpc 127.0.0.1:<grpc port>
#   suite_http http://127.0.0.1:<http port>
# $PY (default python3) picks the free ports.
start_walkthrough_suite() {
  local root=$1 work=$2 py=${PY:-python3}
  "$root/scripts/install-npm.sh" >/dev/null
  (cd "$root" && make -s build)
  local npm_dir="$root/.tools/npm/node_modules/@modelcontextprotocol"
  cat >"$work/extensions_config.json" <<JSON
{"mcpServers": {
  "everything": {"command": "node", "args": ["$npm_dir/server-everything/dist/index.js", "stdio"]},
  "memory": {"command": "node", "args": ["$npm_dir/server-memory/dist/index.js"], "env": {"MEMORY_FILE_PATH": "$work/memory.jsonl"}}
}}
JSON
  # The example's auth section and policy, with two servers instead of ten.
  sed -n '/^auth:/,/^catalog:/p' "$root/examples/toolplane.yaml" | sed '$d' >"$work/toolplane.yaml"
  printf 'catalog:\n  extensions_config: %s\nauthz:\n  policy_file: %s\n' "$work/extensions_config.json" "$root/examples/policy.csv" >>"$work/toolplane.yaml"
  local port='import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'
  local gport hport
  gport=$("$py" -c "$port"); hport=$("$py" -c "$port")
  mkdir -p "$work/data"
  "$root/bin/toolplane" serve --config "$work/toolplane.yaml" --grpc-addr "127.0.0.1:$gport" \
    --http-addr "127.0.0.1:$hport" --data-dir "$work/data" 2>"$work/toolplane.log" &
  pid=$!
  suite_grpc="127.0.0.1:$gport"
  suite_http="http://127.0.0.1:$hport"
  for _ in $(seq 1 150); do curl -sf "$suite_http/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
}
