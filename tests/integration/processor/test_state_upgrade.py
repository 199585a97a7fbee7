"""A worker of this version taking over a changelog that the previous version wrote (pickles),
on the real broker — and one that an attacker wrote to.

The previous version is simulated by its own table values (tests/services/legacy_values, written
by it: make_legacy.py), put on the ``run`` changelog where its workers left them: the state of four
runs half-way through their frames. A worker of this version starts, recovers the table, and is fed
the second halves; each run must go on exactly where it was (the events an uninterrupted run gives,
numbered on from the stored state), and its state be written back as plain data. Beside them, a
value that is a pickle of ``os.system``: never run; the records of its run dead-lettered.
"""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import struct
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from modelevents.adapters.registry import normalize_file
from modelevents.services.kafka import clients
from modelevents.services.kafka.clients import partition_for_key
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics
from tests.integration.pipeline import FIXTURES, Published, collect, feed, fixture_frames, run
from tests.paths import LEGACY_VALUES

pytestmark = pytest.mark.kafka

LEGACY = LEGACY_VALUES
HALVES = {"openai-chat": "reasoning-then-text.sse", "openai-responses": "text-with-usage.sse",
          "anthropic-messages": "pause-turn-then-continuation.sse",
          "gemini-generate": "tool-call-streamed-args.sse"}
ORDINARY = FIXTURES / "gemini-generate" / "grounding-citations.sse"


class _Payload:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


async def _put_on_changelog(settings: PipelineSettings, values: dict[str, bytes]) -> None:
    """Write table values where a worker of the run's partition left them."""
    producer = await clients.start_producer(settings)
    topic = changelog_topics(settings)["run"]
    try:
        for run_id, value in values.items():
            await producer.send_and_wait(topic, value, key=run_id.encode(),
                                         partition=partition_for_key(run_id.encode(),
                                                                     settings.partitions))
    finally:
        await producer.stop()


async def _last_values(settings: PipelineSettings, keys: set[str]) -> dict[str, bytes]:
    topic = changelog_topics(settings)["run"]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        last: dict[str, bytes] = {}
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if record.key.decode() in keys and record.value is not None:
                        last[record.key.decode()] = record.value
        return last
    finally:
        await consumer.stop()


def test_a_worker_takes_over_state_the_previous_version_pickled_and_refuses_a_hostile_one(
        settings: PipelineSettings, start_worker, tmp_path: Path) -> None:
    start_worker("previous").terminate()  # the changelogs exist, as the previous version left them
    marker = tmp_path / "the-payload-ran"
    hostile = struct.pack("<dd", math.inf, math.inf) + pickle.dumps(_Payload(marker))
    legacy = {f"legacy-{api}": (LEGACY / f"legacy-run-{api}.bin").read_bytes() for api in HALVES}
    run(_put_on_changelog(settings, {**legacy, "run-hostile": hostile}))

    worker = start_worker("upgraded")
    second_halves, expected = [], {}
    for api, name in HALVES.items():
        run_id = f"legacy-{api}"
        frames = fixture_frames(FIXTURES / api / name, run_id=run_id)[1]
        second_halves += frames[len(frames) // 2:]
        expected[run_id] = normalize_file(FIXTURES / api / name, run_id=run_id).events
    hostile_frames = fixture_frames(ORDINARY, run_id="run-hostile")[1]
    ordinary_id, ordinary_frames = fixture_frames(ORDINARY)
    run(feed(settings, second_halves + hostile_frames + ordinary_frames))

    def done(p: Published) -> bool:
        return (all(p.runs.get(r) is not None and p.runs[r].last_seq == len(e) - 1
                    for r, e in expected.items())
                and p.complete(ordinary_id, len(normalize_file(ORDINARY).events))
                and sum(d.error_type == "UnreadableState" for d in p.dead) >= len(hostile_frames))

    published = run(collect(settings, done, lambda: worker.log_text()[-3000:]))
    for run_id, events in expected.items():
        by_seq = published.deduped(run_id)
        first = min(by_seq)
        assert first > 0, "the run was numbered afresh instead of going on"
        assert sorted(by_seq) == list(range(first, len(events)))
        # The second half exactly as an uninterrupted run gives it: ids, kinds, payloads, seq.
        assert [by_seq[s] for s in sorted(by_seq)] == events[first:]
        assert not published.runs[run_id].needs_reconciliation
    # The hostile value: never run, nothing published in its run's name, the worker up.
    assert not marker.exists()
    assert "run-hostile" not in published.events and "run-hostile" not in published.runs
    letters = [d for d in published.dead if d.run_key == "run-hostile"]
    assert len(letters) == len(hostile_frames)
    assert all(d.error_type == "UnreadableState" and "refused unread" in d.reason for d in letters)
    assert {d.error_type for d in published.dead} == {"UnreadableState"}
    assert worker.process.poll() is None
    # What the upgraded worker wrote back is plain data of this version's format.
    values = asyncio.run(_last_values(settings, set(expected)))
    assert {r: orjson.loads(v[16:])["format"] for r, v in values.items()} == dict.fromkeys(expected, 1)
