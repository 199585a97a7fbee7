"""`modelevents demo`, the README's main job, run as a user runs it against the real broker."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

pytestmark = pytest.mark.kafka


def test_demo_plays_every_api_through_the_gateway_and_the_pipeline_and_matches_normalize(
        kafka_broker, tmp_path):
    prefix = f"demo{uuid.uuid4().hex[:8]}."
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_broker, "XDG_STATE_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "modelevents.services.cli", "demo", "--prefix", prefix,
         "--rate", "1000", "--duplicate", "0.3"],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all runs match" in result.stdout
    for api in ("openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions",
                "gemini-generate"):
        assert api in result.stdout
    # Eight recordings fed as frames, seven runs through the gateway and the simulator (one
    # polled in the background, whose events no recording gives offline).
    assert result.stdout.count("✓ as normalize") == 14
    assert result.stdout.count("✓ completed as polled") == 1
    assert result.stdout.count(" gateway ") == 7
    assert "duplicates" in result.stdout and "(0 duplicates)" not in result.stdout
    assert result.stderr.count("POST http://127.0.0.1:") == 7  # each answered 202
    # The worker's state and log in the demo's state directory under $XDG_STATE_HOME.
    log = tmp_path / "modelevents" / "demo" / "worker.log"
    assert f"(log: {log})" in result.stderr and log.stat().st_size > 0
