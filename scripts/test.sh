#!/usr/bin/env bash
# The whole test suite: ruff and mypy (scripts/lint.sh), then unit tests, conformance over
# the recorded provider corpus (when present beside the checkout, tests/corpus.py), and integration tests against a real
# Kafka broker that this script starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
cd "$root"
"$root/scripts/lint.sh"
exec "$root/.venv/bin/python" -m pytest "$@"
