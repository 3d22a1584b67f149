#!/usr/bin/env bash
# Breaking-change check of the contract (docs/architecture.md §2):
# - with a release baseline (RELEASE_BASELINE holds the last release's commit):
#   `buf breaking` against it and a diff of proto/toolplane/http.yaml against
#   the same commit; any difference fails.
# - before the first release: report against the previous commit, never fail.
set -uo pipefail
cd "$(dirname "$0")/.."
BUF="go tool -modfile=tools/go.mod buf"
baseline_file=RELEASE_BASELINE
if [ -s "$baseline_file" ]; then
  base=$(tr -d '[:space:]' < "$baseline_file")
  if ! git cat-file -e "$base^{commit}" 2>/dev/null && [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
    git fetch -q --unshallow 2>/dev/null || true
  fi
  if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
    # Only a shallow clone that cannot be deepened gets here; say so loudly.
    echo "breaking: WARNING: release baseline $base (from $baseline_file) is not in this clone (shallow?); cannot compare" >&2
    exit 0
  fi
  echo "breaking: against release baseline $base"
  rc=0
  $BUF breaking --against ".git#ref=$base" || rc=1
  if ! git diff --exit-code "$base" -- proto/toolplane/http.yaml; then
    # Only removed or changed rules break clients; added rules are fine.
    # Comment and blank lines are not routes.
    if git diff "$base" -- proto/toolplane/http.yaml | grep -E '^-[^-]' | grep -vE '^-[[:space:]]*(#|$)' >/dev/null; then
      echo "breaking: http.yaml removes or changes routes of the release" >&2
      rc=1
    fi
  fi
  exit $rc
fi
if git rev-parse -q --verify HEAD~1 >/dev/null; then
  echo "breaking: no release baseline yet; reporting against HEAD~1 (not failing)"
  $BUF breaking --against '.git#ref=HEAD~1' || echo "breaking: (report only) differences above"
  git diff --stat HEAD~1 -- proto/toolplane/http.yaml || true
else
  echo "breaking: no release baseline and no previous commit; nothing to compare"
fi
exit 0
