"""The consumer API (consumers/client.py, issue #17) against the real broker.

Most tests publish a run's events themselves — as ``modelevents normalize`` gives them for a
fixture, seq from 0 — and then add what the pipeline's at-least-once delivery can add (copies of
records already written); the tests that need the pipeline's own output (a run followed to its
end, a pieced 2 MB event, the README's snippet) feed frames through a real ``modelevents worker``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_bytes, normalize_file
from modelevents.consumers import at_offset, at_time, follow_run, subscribe
from modelevents.consumers.client import MissingTopic
from modelevents.schemas import codec
from modelevents.schemas.errors import ConfigError, SchemaError, UndecodableEvent
from modelevents.schemas.events import ModelEvent, Usage
from modelevents.schemas.lazy_event import LazyModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.pipeline import FIXTURES, HANG_GUARD_S, feed, fixture_frames, run
from tests.integration.processor.test_big_runs import _text, chat_run
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka

TEXT = FIXTURES / "openai-responses" / "text-with-usage.sse"
TOOLS = FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse"
CHAT = FIXTURES / "openai-chat" / "tool-calls-finish-stop.sse"

# The README's five-line consumer (README.md, between the consumer-snippet markers).
SNIPPET = '''\
from modelevents.consumers import subscribe

with subscribe("events", group="my-app", kinds={"text.delta", "run.finished"}) as events:
    for event in events:
        print(event.run_id, event.seq, event.kind)
'''
README_BLOCK = re.compile(
    r"<!-- consumer-snippet -->\s*```python\n(.*?)```\s*<!-- /consumer-snippet -->", re.S)


def events_of(path: Path, run_id: str, tenant: str = "default") -> list[ModelEvent]:
    return normalize_bytes(path.read_bytes(), run_id=run_id, tenant=tenant).events


async def publish(settings: PipelineSettings, records: list[ModelEvent | RunState],
                  timestamp_ms: int | None = None) -> None:
    producer = await clients.start_producer(settings)
    try:
        futures = []
        for record in records:
            topic = settings.topic("events" if isinstance(record, ModelEvent) else "runs")
            futures.append(await producer.send(topic, codec.encode(record),
                                               key=record.run_id.encode(),
                                               timestamp_ms=timestamp_ms))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def read_all(settings: PipelineSettings, idle: float = 3.0, **kw) -> tuple[list, object]:
    async def go():
        sub = subscribe(settings=settings, idle_timeout=idle, **kw)
        got = [item async for item in sub]
        return got, sub.stats
    return run(go())


def by_run(items: list) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        out.setdefault(item.run_id, []).append(item.seq)
    return out


# --- dedupe, order ------------------------------------------------------------------------------


def test_duplicates_and_redeliveries_dedupe_and_each_run_comes_in_seq_order(make_settings) -> None:
    settings = make_settings(partitions=1)
    a, b = events_of(TEXT, "run-a"), events_of(TOOLS, "run-b")
    # Interleaved on one partition, then the pipeline's redelivery of both (a worker restarted
    # before its commit writes its last batch again), then a copy of one event in between.
    log = [e for pair in zip(a, b) for e in pair] + a[len(b):] + b[len(a):]
    log += a[3:] + b[:5] + [a[0]]
    run(publish(settings, log))
    got, stats = read_all(settings)
    assert by_run(got) == {"run-a": list(range(len(a))), "run-b": list(range(len(b)))}
    assert [e for e in got if e.run_id == "run-a"] == a
    assert [e for e in got if e.run_id == "run-b"] == b
    assert stats.duplicates == len(a) - 3 + 5 + 1


def test_run_states_are_typed_and_deduped(make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-s")
    middle, final = run_state_of(events[:4]), run_state_of(events)
    run(publish(settings, [middle, middle, final, middle, final]))
    got, stats = read_all(settings, topics="runs")
    assert got == [middle, final] and all(isinstance(s, RunState) for s in got)
    assert stats.duplicates == 3


def test_a_restarted_member_drops_the_pipelines_copies_that_straddle_its_committed_offset(
        make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TOOLS, "run-r")
    run(publish(settings, events[:10]))
    got, _ = read_all(settings, group="r1")  # everything handled and committed (offset 10)
    assert [e.seq for e in got] == list(range(10))
    got, _ = read_all(settings, group="r0", dedupe_lookback=0)  # a second group, committed too
    # The worker restarted before its commit: seq 5..9 are written again, then the rest.
    run(publish(settings, events[5:]))
    got, stats = read_all(settings, group="r1")
    assert [e.seq for e in got] == list(range(10, len(events)))
    assert stats.primed == 10 and stats.duplicates == 5
    # Without the lookback the copies past the committed offset are delivered once more.
    got, _ = read_all(settings, group="r0", dedupe_lookback=0)
    assert [e.seq for e in got] == list(range(5, len(events)))


# --- commit after the handler -------------------------------------------------------------------


def test_a_handler_that_raises_leaves_its_event_to_the_next_consumer_of_the_group(
        make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-h")
    run(publish(settings, events))
    handled: list[int] = []

    async def handler(event: ModelEvent) -> None:
        if event.seq == 5:
            raise RuntimeError("downstream down")
        handled.append(event.seq)

    async def first() -> None:
        with pytest.raises(RuntimeError, match="downstream down"):
            await subscribe(settings=settings, group="g1", idle_timeout=10).consume(handler)
    run(first())
    assert handled == [0, 1, 2, 3, 4]
    got, _ = read_all(settings, group="g1")
    assert [e.seq for e in got] == list(range(5, len(events)))


def test_a_plain_handler_runs_over_a_fetch_in_one_loop_and_one_that_raises_is_not_committed(
        make_settings) -> None:
    # A plain function is called over what a fetch read without an await per event; the event
    # it raised on, and only that one, is left to the next consumer of the group.
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-q") + events_of(TOOLS, "run-w")
    run(publish(settings, events))
    handled: list[tuple[str, int]] = []

    def handler(event: ModelEvent) -> None:
        if (event.run_id, event.seq) == ("run-w", 3):
            raise RuntimeError("downstream down")
        handled.append((event.run_id, event.seq))

    async def first() -> int:
        sub = subscribe(settings=settings, group="q1", idle_timeout=10)
        with pytest.raises(RuntimeError, match="downstream down"):
            await sub.consume(handler)
        return sub.stats.yielded
    yielded = run(first())
    at = next(i for i, e in enumerate(events) if (e.run_id, e.seq) == ("run-w", 3))
    assert handled == [(e.run_id, e.seq) for e in events[:at]] and yielded == at + 1
    got, _ = read_all(settings, group="q1")
    assert got == events[at:]


def test_a_batch_handler_gets_lists_and_a_list_it_raises_on_is_not_committed(
        make_settings) -> None:
    settings = make_settings(partitions=2)
    runs = {f"run-b{i}": events_of(TEXT if i % 2 else TOOLS, f"run-b{i}") for i in range(6)}
    run(publish(settings, [e for events in runs.values() for e in events]))
    batches: list[list[ModelEvent]] = []

    def handler(batch: list[ModelEvent]) -> None:
        assert batch and all(isinstance(e, ModelEvent) for e in batch)
        batches.append(batch)

    # Every event once, in seq order per run, in lists (a partition's fetch each).
    sub = subscribe(settings=settings, group="b1", idle_timeout=5)
    run(sub.consume(handler, batch=True))
    got = [e for batch in batches for e in batch]
    assert {r: [e for e in got if e.run_id == r] for r in runs} == runs
    assert sub.stats.yielded == len(got) and sub.stats.commits >= 1
    assert read_all(settings, group="b1")[0] == []  # all committed

    # A list whose handler raises is left whole to the next consumer; the lists before it are
    # committed. (One fetch per batch: the second list cannot hold what the first did.)
    batches.clear()

    async def fails_on_second(batch: list[ModelEvent]) -> None:
        if batches:
            raise RuntimeError("bulk write failed")
        batches.append(batch)

    async def second() -> None:
        with pytest.raises(RuntimeError, match="bulk write failed"):
            await subscribe(settings=settings, group="b2", idle_timeout=5,
                            consumer_options={"max_partition_fetch_bytes": 4096}
                            ).consume(fails_on_second, batch=True)
    run(second())
    first = batches[0]
    again, _ = read_all(settings, group="b2")
    assert first and not any(e in again for e in first)
    assert sorted((e.run_id, e.seq) for e in first + again) == sorted(
        (e.run_id, e.seq) for events in runs.values() for e in events)


def test_a_skipped_undecodable_event_does_not_drop_a_good_copy_read_after_it(
        make_settings) -> None:
    # The pipeline writes a record again (at least once): when the first copy's payload does
    # not decode, consume skips it — and the good copy after it is the event, handed on.
    settings = make_settings(partitions=1)
    events, k, broken = with_a_broken_delta("run-c")

    async def write() -> None:
        await publish(settings, events[:k])
        await send_raw(settings, [broken], key=b"run-c")
        await publish(settings, events[k:])
    run(write())
    handled: list[ModelEvent] = []

    def handler(event: ModelEvent) -> None:
        assert event.payload is not None
        handled.append(event)

    sub = subscribe(settings=settings, group="c1", idle_timeout=5)
    run(sub.consume(handler))
    assert handled == events and sub.stats.undecodable == 1 and sub.stats.duplicates == 0


def test_following_a_run_ends_when_its_last_event_was_skipped_as_undecodable(
        make_settings) -> None:
    # A skipped event's seq is not taken as seen (a good copy may follow), yet a followed run
    # whose last event before its terminal state is that one must still end, not poll for ever.
    settings = make_settings(partitions=1)
    events, k, broken = with_a_broken_delta("run-f")
    terminal = dataclasses.replace(run_state_of(events), last_seq=k)
    assert terminal.terminal

    async def write() -> None:
        await publish(settings, events[:k])
        await send_raw(settings, [broken], key=b"run-f")
        await publish(settings, [terminal])
    run(write())
    handled: list[ModelEvent | RunState] = []

    def handler(item: ModelEvent | RunState) -> None:
        if isinstance(item, ModelEvent):
            assert item.payload is not None  # the broken delta raises here: skipped
        handled.append(item)

    sub = follow_run("run-f", settings=settings, timeout=30)
    run(sub.consume(handler))
    assert [e for e in handled if isinstance(e, ModelEvent)] == events[:k]
    assert handled[-1] == terminal and sub.stats.undecodable == 1


def test_an_iterator_block_that_raises_does_not_commit_its_item(make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-i")
    run(publish(settings, events))
    seen = []
    with pytest.raises(ValueError):
        with subscribe(settings=settings, group="g2", idle_timeout=10) as sub:
            for event in sub:
                seen.append(event.seq)
                if event.seq == 3:
                    raise ValueError("could not store it")
    assert seen == [0, 1, 2, 3]
    got, _ = read_all(settings, group="g2")
    assert [e.seq for e in got] == list(range(3, len(events)))
    # A block that ends normally commits everything it was given, the last item too.
    with subscribe(settings=settings, group="g3", idle_timeout=10) as sub:
        for event in sub:
            if event.seq == 2:
                break
    got, _ = read_all(settings, group="g3")
    assert [e.seq for e in got] == list(range(3, len(events)))


KILLED_CONSUMER = '''
import sys, time
from modelevents.consumers import subscribe
sub = subscribe("events", group="killed", commit_interval=3600)
for event in sub:
    print("handled", event.seq, flush=True)
    if event.seq == 3:
        sub.commit_sync()
        print("committed", flush=True)
    if event.seq == 6:
        print("stopping", flush=True)
        time.sleep(3600)  # SIGKILLed here: handled, not committed
'''


def _env(settings: PipelineSettings) -> dict[str, str]:
    return dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=settings.bootstrap_servers,
                MODELEVENTS_TOPIC_PREFIX=settings.topic_prefix, PYTHONUNBUFFERED="1")


def _lines_until(process: subprocess.Popen, last: str) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + HANG_GUARD_S
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the consumer exited ({process.wait()}) after {lines}")
        lines.append(line.strip())
        if line.strip() == last:
            return lines
    raise AssertionError(f"no {last!r} in {lines}")


def test_a_held_item_keeps_the_commit_behind_it_until_released(make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-h")
    run(publish(settings, events))

    async def hold_seq(group: str, held: int, release_at: int | None) -> None:
        async with subscribe(settings=settings, group=group, idle_timeout=3) as sub:
            with pytest.raises(ConfigError, match="hold"):
                sub.hold()  # nothing yielded yet
            releases = []
            async for event in sub:
                if event.seq == held:
                    releases.append(sub.hold())
                if event.seq == release_at:
                    releases[0]()
                    releases[0]()  # a second call does nothing
                await sub.commit()  # everything else handled so far is processed

    run(hold_seq("h1", 2, release_at=None))
    got, _ = read_all(settings, group="h1")
    assert [e.seq for e in got] == list(range(2, len(events)))  # from the held one on
    run(hold_seq("h2", 2, release_at=4))
    assert read_all(settings, group="h2")[0] == []  # released: committed past everything


def test_sigkill_between_handling_and_commit_redelivers_never_loses(make_settings,
                                                                    tmp_path: Path) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-k")
    run(publish(settings, events))
    script = tmp_path / "consumer.py"
    script.write_text(KILLED_CONSUMER)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                               env=_env(settings), start_new_session=True)
    try:
        lines = _lines_until(process, "stopping")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert lines == [f"handled {i}" for i in range(4)] + ["committed"] + [
        f"handled {i}" for i in range(4, 7)] + ["stopping"]
    got, _ = read_all(settings, group="killed")
    # 4..6 were handled but not committed: delivered again; 0..3 committed: not again.
    assert [e.seq for e in got] == list(range(4, len(events)))


# --- where to start -----------------------------------------------------------------------------


def test_start_latest_offset_and_time(make_settings) -> None:
    settings = make_settings(partitions=1)
    old, new = events_of(TEXT, "run-old"), events_of(CHAT, "run-new")
    hour_ago = int(time.time() * 1000) - 3_600_000
    run(publish(settings, old, timestamp_ms=hour_ago))
    got, _ = read_all(settings, start=at_offset(4))
    assert [(e.run_id, e.seq) for e in got] == [("run-old", s) for s in range(4, len(old))]

    async def latest() -> list[ModelEvent]:
        async with subscribe(settings=settings, start="latest", idle_timeout=4) as sub:
            await asyncio.sleep(1.0)  # assigned and positioned at the end before new arrive
            await publish(settings, new)
            return [e async for e in sub]
    assert [e.run_id for e in run(latest())] == ["run-new"] * len(new)
    got, _ = read_all(settings, start=at_time(hour_ago + 60_000))
    assert {e.run_id for e in got} == {"run-new"} and len(got) == len(new)
    got, _ = read_all(settings, start="earliest")
    assert len(got) == len(old) + len(new)


def test_tenant_kind_and_provider_filters(make_settings) -> None:
    settings = make_settings(partitions=2)
    acme = events_of(TEXT, "run-acme", tenant="acme")
    other = events_of(TEXT, "run-other", tenant="other")
    claude = events_of(TOOLS, "run-claude", tenant="acme")
    run(publish(settings, acme + other + claude))
    got, stats = read_all(settings, tenant="acme", kinds={"text.delta", "run.finished"})
    assert {e.run_id for e in got} == {"run-acme", "run-claude"}
    assert all(e.kind in ("text.delta", "run.finished") and e.tenant == "acme" for e in got)
    assert [e for e in got if e.run_id == "run-acme"] == [
        e for e in acme if e.kind in ("text.delta", "run.finished")]
    assert stats.filtered == len(other) + sum(
        e.kind not in ("text.delta", "run.finished") for e in acme + claude)
    got, _ = read_all(settings, providers={"anthropic"})
    assert [e.event_id for e in got] == [e.event_id for e in claude]
    with pytest.raises(ConfigError, match="unknown event kinds"):
        subscribe(settings=settings, kinds={"text"})


# --- the pipeline's own output ------------------------------------------------------------------


def test_follow_run_to_its_terminal_state_through_a_real_worker(settings, start_worker) -> None:
    start_worker()
    run_id, frames = fixture_frames(TOOLS)
    expected = normalize_file(TOOLS).events

    async def go() -> list:
        follower = follow_run(run_id, settings=settings, timeout=120)
        feeding = asyncio.create_task(feed(settings, frames, duplicate=0.3, seed=7))
        got = [item async for item in follower]
        await feeding
        return got
    got = run(go())
    events = [i for i in got if isinstance(i, ModelEvent)]
    states = [i for i in got if isinstance(i, RunState)]
    assert events == expected
    assert isinstance(got[-1], RunState) and got[-1].terminal
    assert got[-1] == run_state_of(expected) and not any(s.terminal for s in states[:-1])


def test_a_pieced_2mb_event_arrives_assembled_and_the_elided_done_rebuilt(
        settings, start_worker, tmp_path: Path) -> None:
    start_worker()
    text = "".join(_text(2_000_000, "one-delta"))
    path = tmp_path / "chat-2mb-one-delta.sse"
    path.write_bytes(chat_run([text], "chatcmpl-2mb-one"))
    run_id, frames = fixture_frames(path)
    run(feed(settings, frames))

    def follow(**kw) -> list[ModelEvent]:
        return [e for e in follow_run(run_id, settings=settings, timeout=120, **kw)
                if isinstance(e, ModelEvent)]
    assembled = follow(rebuild_elided=True)
    deltas = [e for e in assembled if e.kind == "text.delta"]
    assert len(deltas) == 1 and deltas[0].payload.text == text and deltas[0].piece is None
    done = next(e for e in assembled if e.kind == "text.done")
    assert done.elided is not None and done.payload.text == text
    raw = follow(raw_pieces=True)
    pieces = [e for e in raw if e.kind == "text.delta"]
    assert len(pieces) == pieces[0].piece.count > 1
    plain_done = next(e for e in raw if e.kind == "text.done")
    assert plain_done.payload.text == ""
    assert [e.seq for e in raw] == list(range(len(raw)))
    assert len(assembled) == sum(e.piece is None or e.piece.index == 0 for e in raw) < len(raw)
    assert [e.seq for e in assembled] == [e.seq for e in raw if e.piece is None or e.piece.index == 0]


def test_the_readme_snippet_runs_as_shown(settings, start_worker, tmp_path: Path) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    if "<!-- consumer-snippet -->" in readme:
        block = README_BLOCK.search(readme)
        assert block is not None, "README: no ```python block between the consumer-snippet markers"
        assert block.group(1) == SNIPPET
    assert len(SNIPPET.strip().splitlines()) <= 5
    start_worker()
    run_id, frames = fixture_frames(TEXT)
    run(feed(settings, frames))
    expected = [f"{run_id} {e.seq} {e.kind}" for e in normalize_file(TEXT).events
                if e.kind in ("text.delta", "run.finished")]
    process = subprocess.Popen([sys.executable, "-c", SNIPPET], stdout=subprocess.PIPE,
                               text=True, env=_env(settings), start_new_session=True)
    try:
        lines = _lines_until(process, expected[-1])
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert lines == expected


# --- interop and errors -------------------------------------------------------------------------


def test_a_librdkafka_consumer_beside_ours_sees_the_same_records(make_settings) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import KafkaError as RdKafkaError

    settings = make_settings(partitions=2)
    published = events_of(TEXT, "run-x") + events_of(TOOLS, "run-y")
    run(publish(settings, published))
    ours, _ = read_all(settings, group="ours")
    theirs: list[ModelEvent] = []
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "theirs",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        consumer.subscribe([settings.topic("events")])
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while len(eof) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == RdKafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise AssertionError(msg.error())
            theirs.append(codec.decode(msg.value()))
    finally:
        consumer.close()
    key = lambda e: (e.run_id, e.seq)  # noqa: E731
    assert sorted(ours, key=key) == sorted(theirs, key=key) == sorted(published, key=key)


async def send_raw(settings: PipelineSettings, values: list[bytes], key: bytes = b"run-u") -> None:
    producer = await clients.start_producer(settings)
    try:
        for value in values:
            await producer.send_and_wait(settings.topic("events"), value, key=key)
    finally:
        await producer.stop()


def with_a_broken_delta(run_id: str) -> tuple[list[ModelEvent], int, bytes]:
    """A run's events, the index of its first text.delta, and that delta's record with its text
    made bytes that are not UTF-8 (its header reads, its payload does not)."""
    events = events_of(TEXT, run_id)
    k = next(i for i, e in enumerate(events) if e.kind == "text.delta")
    marked = dataclasses.replace(events[k], payload=dataclasses.replace(events[k].payload,
                                                                        text="MARKER"))
    return events, k, codec.encode(marked).replace(b"MARKER", b"\xff" * 6)


def test_an_event_whose_payload_does_not_decode_raises_when_read_and_is_never_lost(
        make_settings) -> None:
    settings = make_settings(partitions=1)
    events, k, broken = with_a_broken_delta("run-p")

    async def write() -> None:
        await publish(settings, events[:k])
        await send_raw(settings, [broken], key=b"run-p")
        await publish(settings, events[k + 1:])
    run(write())

    # A router reading headers gets every event, that one too, and nothing is decoded. (Only
    # plain values leave the coroutine: Python 3.11's asyncio.run may repr what it returns.)
    async def route() -> tuple[list[tuple[int, str, bool]], int, str]:
        sub = subscribe(settings=settings, idle_timeout=3)
        got = [e async for e in sub]
        seen = [(e.seq, e.kind, type(e) is LazyModelEvent and e._record is not None) for e in got]
        try:
            got[k].payload  # noqa: B018
        except UndecodableEvent as exc:
            return seen, sub.stats.undecodable, str(exc)
        return seen, sub.stats.undecodable, "no error"
    seen, undecodable, error = run(route())
    assert seen == [(e.seq, e.kind, True) for e in events] and undecodable == 0
    assert re.search(rf"\[0\]@{k}: corrupt .* past its header", error), error
    handled: list[int] = []

    async def handler(event: ModelEvent) -> None:
        assert event.payload is not None
        handled.append(event.seq)

    async def consume(**kw) -> int:
        sub = subscribe(settings=settings, group="p1", idle_timeout=5, **kw)
        await sub.consume(handler)
        return sub.stats.undecodable
    # on_undecodable="raise": the handler's read raises out of consume, the event uncommitted…
    with pytest.raises(UndecodableEvent):
        run(consume(on_undecodable="raise"))
    assert handled == list(range(k))
    # … so the next consumer of the group gets it again: skipped (counted), the rest handled.
    handled.clear()
    assert run(consume()) == 1
    assert handled == list(range(k + 1, len(events)))
    got, _ = read_all(settings, group="p1")
    assert got == []  # committed past it
    # In a for loop it is the caller's: caught, the loop goes on and the event is processed.
    read: list[bool | None] = []
    with subscribe(settings=settings, group="p2", idle_timeout=5) as sub:
        for event in sub:
            try:
                read.append(event.payload == events[event.seq].payload)
            except UndecodableEvent:
                read.append(None)
    assert read == [None if i == k else True for i in range(len(events))]
    got, _ = read_all(settings, group="p2")
    assert got == []


def test_clear_errors_and_undecodable_records(make_settings) -> None:
    settings = make_settings(partitions=1)
    events = events_of(TEXT, "run-u")

    # A copy of seq 1 whose payload is not what its kind carries: dropped by its header as a
    # duplicate, never decoded (a dropped record is not).
    wrong = codec.encode(dataclasses.replace(events[1], payload=Usage()))

    async def garbage() -> None:
        await publish(settings, events[:2])
        await send_raw(settings, [b"not avro", wrong])
        await publish(settings, events[2:])
    run(garbage())
    got, stats = read_all(settings)
    assert got == events and stats.undecodable == 1 and stats.duplicates == 1
    with pytest.raises(SchemaError):
        read_all(settings, on_undecodable="raise")
    missing = dataclasses.replace(settings, topic_prefix="nowhere.")
    with pytest.raises(MissingTopic, match="modelevents topics create --prefix nowhere."):
        read_all(missing)
    closed = dataclasses.replace(settings, bootstrap_servers="127.0.0.1:1")
    with pytest.raises(KafkaUnavailable, match="cannot reach Kafka at 127.0.0.1:1"):
        read_all(closed)
