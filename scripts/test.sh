#!/usr/bin/env bash
# The whole test suite: unit, conformance over ../shared/fixtures (when present beside the
# checkout), and integration tests against a real Kafka broker that this script starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/python" -m pytest "$@"
