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
