#!/usr/bin/env bash
# Static checks, run first by scripts/test.sh: ruff (rules in pyproject.toml), the import rules
# (lint-imports, contracts in pyproject.toml's [tool.importlinter]) and mypy over the
# installed package layout; then the UI's ES modules (services/gateway/static/, all `// @ts-check`):
# ESLint (and over the node clients' scripts of the proxy's tests) and TypeScript's checker
# (tsc --noEmit over the JavaScript, JSDoc types), pinned in
# tools/ui/package-lock.json and installed by scripts/bootstrap.sh. The repository keeps schemas/, adapters/, services/ and consumers/ at
# its top level while they install as modelevents.*; mypy reads the package through a directory
# of symlinks that mirrors the installed layout (made afresh under .venv, nothing to commit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/.venv/bin/ruff" check .
"$root/.venv/bin/lint-imports" --cache-dir "$root/.venv/import-linter-cache" "$root/pyproject.toml"
layout="$root/.venv/typecheck"
rm -rf "$layout" && mkdir -p "$layout/modelevents"
for package in schemas adapters services consumers; do
  ln -s "$root/$package" "$layout/modelevents/$package"
done
(cd "$layout" && "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" \
   --cache-dir "$root/.venv/mypy-cache" -p modelevents)
ui_tools="$root/tools/ui/node_modules/.bin"
[[ -x "$ui_tools/tsc" && -x "$ui_tools/eslint" ]] || {
  echo "the UI's checks are not installed (tools/ui/node_modules): run scripts/bootstrap.sh" >&2
  exit 1
}
"$ui_tools/eslint" --max-warnings 0 -c "$root/tools/ui/eslint.config.js" services/gateway/static tests/ui \
  tests/integration/gateway/node_clients tools/node-clients/sdks.mjs
"$ui_tools/tsc" -p "$root/tools/ui/tsconfig.json"
"$ui_tools/tsc" -p "$root/tools/ui/tsconfig.worker.json"
