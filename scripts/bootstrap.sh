#!/usr/bin/env bash
# Creates .venv and installs modelevents with every extra (all) and the test and benchmark ones.
# Idempotent and cheap when nothing changed (a stamp keyed by pyproject.toml's hash). Needs python3 >= 3.11.
# Then the UI's checks (tools/ui: ESLint, TypeScript) and the node SDKs the proxy is tested with
# (tools/node-clients), exactly as their package-lock.json pins them, with scripts/npm-ci.sh
# (`npm ci`; needs node >= 20 and npm; stamped by the lockfile's hash; npm's downloads cached
# under ~/.cache/modelevents/npm).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
py=${PYTHON:-python3}
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "modelevents needs Python >= 3.11 (found: $("$py" --version 2>&1 || echo none)); set PYTHON=" >&2
  exit 1
fi
[[ -x "$venv/bin/python" ]] || { echo "creating $venv" >&2; "$py" -m venv "$venv"; }
stamp="$venv/.modelevents-installed"
want=$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "installing modelevents and its dependencies into $venv (first run takes a minute)" >&2
  log="$venv/install.log"
  if ! { "$venv/bin/python" -m pip install --upgrade pip setuptools wheel &&
         "$venv/bin/python" -m pip install -e "$root[all,test,bench]"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "installing modelevents failed; the whole pip log is in $log" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
# The UI's browser tests (tests/integration/ui/test_ui.py) and bench/ui.py drive Debian's Chromium
# through Playwright; Playwright's own browser downloads are never used.
if ! command -v chromium >/dev/null 2>&1; then
  apt_log="$venv/chromium-install.log"
  as_root=()
  [[ $(id -u) -eq 0 ]] || as_root=(sudo -n)
  if command -v apt-get >/dev/null 2>&1 &&
     { "${as_root[@]}" apt-get update -q && DEBIAN_FRONTEND=noninteractive \
       "${as_root[@]}" apt-get install -y -q chromium; } >"$apt_log" 2>&1; then
    echo "installed Debian's chromium for the UI's browser tests" >&2
  else
    echo "the UI's browser tests need Chromium: sudo apt-get install -y chromium (log: $apt_log)" >&2
  fi
fi
"$root/scripts/npm-ci.sh" "$root/tools/ui"
"$root/scripts/npm-ci.sh" "$root/tools/node-clients"
