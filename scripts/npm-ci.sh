#!/usr/bin/env bash
# Installs a pinned node package of tools/ (its package-lock.json) into its node_modules with
# `npm ci`: usage `scripts/npm-ci.sh tools/ui`. Idempotent and cheap when nothing changed (a
# stamp keyed by the lockfile's hash); npm's downloads are cached under ~/.cache/modelevents/npm
# (used when there, fetched from the npm registry when not). Needs node >= 20 and npm. Run by
# scripts/bootstrap.sh for tools/ui, and by the tests that drive tools/node-clients.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "${1:?usage: scripts/npm-ci.sh tools/<package>}" && pwd)
stamp="$dir/node_modules/.modelevents-installed"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
[[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && exit 0
if ! command -v npm >/dev/null 2>&1; then
  echo "${dir#"$root"/} needs node >= 20 and npm: sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
echo "installing ${dir#"$root"/} into its node_modules (npm ci)" >&2
log=$(mktemp "${TMPDIR:-/tmp}/modelevents-npm-ci.XXXXXX")
if ! (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error \
        --cache "${XDG_CACHE_HOME:-$HOME/.cache}/modelevents/npm") >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "installing ${dir#"$root"/} failed; the whole npm log is in $log" >&2
  exit 1
fi
rm -f "$log"
echo "$want" > "$stamp"
