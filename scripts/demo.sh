#!/usr/bin/env bash
# The main job: sets up .venv, starts the local Kafka broker if needed (Java >= 17 and Maven
# fetch and run it; nothing to install by hand), creates the topics, runs a worker, plays
# recorded sessions of every provider API through the pipeline with duplicated frames, and checks
# every run against `modelevents normalize`; then the tool executor completes a tool run and a write
# the demo approves, the topics are archived and verified, the runs exported as OTel spans, and it
# prints the UI's address. Extra arguments go to `modelevents demo` (e.g. --keep, --stop-broker).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/modelevents" demo "$@"
