#!/usr/bin/env bash
# Installs the pinned @agentclientprotocol/sdk (package-lock.json) of the
# fixture ACP agent that services/catalog/catalogacp tests run, into its
# git-ignored node_modules. Idempotent: nothing is fetched when the pinned
# version is already installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/services/catalog/catalogacp/testdata/agent"
want=$(node -e "console.log(require('$dir/package.json').dependencies['@agentclientprotocol/sdk'])")
got=$(node -e "try{console.log(require('$dir/node_modules/@agentclientprotocol/sdk/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ "$got" = "$want" ]; then
  exit 0
fi
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
