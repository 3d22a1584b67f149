#!/usr/bin/env bash
# Search evaluation (docs/search.md), the long form of the CI gate: every
# mode on the DEV split of both toolret benchmarks in testdata/ (or
# $TOOLPLANE_DATA), with AUTO's settings chosen by 5-fold cross-validation
# over the full grid, then the catalog benchmark (train and bench parts)
# synthesised from mcp-catalog/mcpm-registry. Prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${TOOLPLANE_DATA:-testdata}
bin=${TOOLPLANE_BIN:-bin/toolplane}
for set in livemcpbench metatool; do
  echo "== $set (dev)"
  "$bin" eval search --tools "$data/toolret/$set/tools.jsonl" --queries "$data/toolret/$set/queries.jsonl" \
    --split dev --folds 5 --grid full "$@"
done
for part in train bench; do
  echo "== catalog benchmark ($part)"
  "$bin" eval search --catalog "$data/mcp-catalog/mcpm-registry/tools.jsonl" \
    --exclude "$data/toolret/livemcpbench/tools.jsonl" --exclude "$data/toolret/metatool/tools.jsonl" \
    --part "$part" --folds 5 --grid full "$@"
done
