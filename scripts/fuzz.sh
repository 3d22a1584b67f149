#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a short budget each (default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-10s}
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | grep -v '^./.tools/' | sort | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  for fn in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed 's/^func //'); do
    echo "fuzz: $pkg $fn ($budget)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$budget" "$pkg"
  done
done
