#!/usr/bin/env bash
# Search evaluation (docs/search.md): every mode on the DEV split of both toolret
# benchmarks in testdata/ (or $TOOLPLANE_DATA). Prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${TOOLPLANE_DATA:-testdata}
bin=${TOOLPLANE_BIN:-bin/toolplane}
for set in livemcpbench metatool; do
  echo "== $set (dev)"
  "$bin" eval search --tools "$data/toolret/$set/tools.jsonl" --queries "$data/toolret/$set/queries.jsonl" --split dev "$@"
done
