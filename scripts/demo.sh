#!/usr/bin/env bash
# The main job: normalizes the project's own recorded sessions for every provider API and prints
# a digest of each run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
cd "$root"
for f in tests/fixtures/*/*; do
  [[ -f "$f" ]] || continue
  echo "=== $f"
  "$root/.venv/bin/modelevents" normalize --summary "$f"
done
