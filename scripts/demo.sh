#!/usr/bin/env bash
# The main job: normalizes the project's own recorded sessions for every provider API and prints
# a digest of each run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
cd "$root"
# One recorded session per provider API from the project's own fixtures.
sessions=(
  tests/fixtures/openai-responses/tool-call-parallel.sse
  tests/fixtures/openai-chat/reasoning-then-text.sse
  tests/fixtures/anthropic-messages/pause-turn-then-continuation.sse
  tests/fixtures/gemini-interactions/google-search-cited-event-ids.sse
  tests/fixtures/gemini-generate/grounding-citations.sse
  tests/fixtures/cassettes/anthropic-tool-loop.yaml
)
for f in "${sessions[@]}"; do
  echo "=== $f"
  "$root/.venv/bin/modelevents" normalize --summary "$f"
  echo
done
