#!/usr/bin/env bash
# Static checks, run first by scripts/test.sh: ruff (rules in pyproject.toml), the import rules
# (lint-imports, contracts in pyproject.toml's [tool.importlinter]) and mypy over the
# installed package layout. The repository keeps schemas/, adapters/, services/ and consumers/ at
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
