"""Every recorded file of the corpus and every own fixture through the real pipeline: what lands
on `events` (after dedupe by (run_id, seq)) and `runs` equals what `modelevents normalize` gives
for the same file."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.errors import DetectionError
from tests.corpus import corpus_files, require_corpus
from tests.integration.pipeline import (
    assert_run_as_normalized,
    collect,
    expected_counts,
    feed,
    fixture_frames,
    own_recordings,
    run,
)
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

OWN = own_recordings()


def _runs(paths: list[Path]) -> list[Path]:
    readable = []
    for path in paths:
        try:
            normalize_file(path)
        except DetectionError:
            continue  # not provider output (the transcribed webhook test vector)
        readable.append(path)
    return readable


@pytest.mark.parametrize("source", ["corpus", "own"])
def test_every_recording_through_the_pipeline_equals_normalize(source, settings, start_worker):
    if source == "corpus":
        require_corpus()
        paths = _runs(corpus_files(""))
        assert len(paths) > 100
    else:
        paths = _runs(OWN)
    worker = start_worker()
    frames = [f for path in paths for f in fixture_frames(path)[1]]
    run(feed(settings, frames, duplicate=0.1, seed=3))
    counts = expected_counts(paths)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            worker.log_text))
    for path in paths:
        assert_run_as_normalized(published, path)
    # How the worker stops (SIGTERM → clean exit) is test_processor's subject; here the fixture
    # kills it once the pipeline's output is checked.


# Issue #29: streams of OpenAI-compatible servers (docs/compatible-servers.md) and how the
# worker must leave their runs.
COMPATIBLE = {
    "finish-repeated-new-id.sse": "completed",
    "no-finish-reason-usage-then-done.sse": "waiting_for_tool",
    "openrouter-reasoning-text-signature.sse": "completed",
    "openrouter-reasoning-summary-encrypted.sse": "waiting_for_tool",
    "tool-call-header-repeated.sse": "waiting_for_tool",
}


def test_compatible_server_runs_end_on_the_worker_as_normalize_ends_them(settings, start_worker):
    paths = [FIXTURES / "openai-chat" / name for name in COMPATIBLE]
    worker = start_worker()
    run(feed(settings, [f for path in paths for f in fixture_frames(path)[1]], duplicate=0.2,
             seed=29))
    counts = expected_counts(paths)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            worker.log_text))
    for path in paths:
        assert_run_as_normalized(published, path)
        state = published.runs[normalize_file(path).run_id]
        # One provider call per stream (a repeated finish under a new id is not a second one),
        # ended as the server ended it, nothing left to reconcile.
        assert (path.name, state.status) == (path.name, COMPATIBLE[path.name])
        assert len(state.provider_object_ids) == 1 and not state.needs_reconciliation, path.name
        assert state.usage is None or state.usage.total_tokens, path.name
