"""Topics, feed and tail against a real Kafka broker (the project's own, on its own port).

This module runs its own broker on 19300 + 10 * xdist worker (controller on port + 1) with a temp
state dir; every test gets fresh topics under a unique prefix (``pipeline_settings`` /
``make_settings`` from conftest.py).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
from collections import defaultdict

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from modelevents.adapters.registry import normalize_file
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import is_end_of_input
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.run_state import DeadLetter, RunState
from modelevents.services import cli
from modelevents.services.cli.commands import tail as tail_command
from modelevents.services.errors import how_to_reach_kafka
from modelevents.services.gateway.events.owners import encode_claim
from modelevents.services.kafka import clients, topics
from modelevents.services.kafka.settings import TOPICS, PipelineSettings
from modelevents.services.local import feeder
from tests.helpers import free_port
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import kafka_args
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19300, scope="module")

PAUSE_TURN = FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse"
REFUSAL = FIXTURES / "openai-responses" / "refusal.sse"
CASSETTE = FIXTURES / "cassettes" / "anthropic-tool-loop.yaml"
# A guard against a hang, not a timing assertion: a correct run ends long before it.
HANG_GUARD_S = 120


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, HANG_GUARD_S))


@pytest.fixture
def cli_main():
    """The `modelevents` command's entry point, called in process."""
    return cli.main



async def _read_all(settings: PipelineSettings, topic: str, run_id: str | None = None,
                    timeout: float = 3.0) -> list[clients.Record]:
    return [r async for r in clients.read_records(settings, topic, run_id=run_id, timeout=timeout)]


async def _cleanup_policies(settings: PipelineSettings) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        names = list(settings.topic_names.values())
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    finally:
        await admin.close()
    return {res[3]: value for response in responses for res in response.resources
            for name, value, *_ in res[4] if name == "cleanup.policy"}


# --- topics ------------------------------------------------------------------------------------


def test_topics_create_is_idempotent(make_settings) -> None:
    settings = make_settings(create_topics=False, partitions=3)
    first = run(topics.ensure_topics(settings))
    assert first == {settings.topic(n): "created" for n in TOPICS}
    second = run(topics.ensure_topics(settings))
    assert second == {settings.topic(n): "verified" for n in TOPICS}
    assert run(topics.verify_topics(settings)) == second
    infos = run(topics.describe_topics(settings))
    assert {info.partitions for info in infos.values()} == {3}


def test_concurrent_creates_agree(make_settings) -> None:
    settings = make_settings(create_topics=False)

    async def both():
        return await asyncio.gather(topics.ensure_topics(settings), topics.ensure_topics(settings))

    a, b = run(both())
    for name in settings.topic_names.values():
        assert {a[name], b[name]} <= {"created", "verified"}
    run(topics.verify_topics(settings))


def test_runs_is_compacted_and_the_others_are_not(pipeline_settings: PipelineSettings) -> None:
    policies = run(_cleanup_policies(pipeline_settings))
    assert policies == {pipeline_settings.topic(n): ("compact" if compacted else "delete")
                        for n, compacted in TOPICS.items()}


def test_partition_mismatch_is_refused_with_the_fix(make_settings) -> None:
    settings = make_settings(partitions=2)
    wanted = dataclasses.replace(settings, partitions=3)
    for check in (topics.ensure_topics, topics.verify_topics):
        with pytest.raises(ConfigError) as info:
            run(check(wanted))
        message = str(info.value)
        assert settings.topic("frames") in message
        assert "has 2 partitions, expected 3" in message
        assert "MODELEVENTS_PARTITIONS=2" in message and "topics delete" in message


def test_a_runs_topic_that_is_not_compacted_is_refused(make_settings) -> None:
    settings = make_settings(create_topics=False)

    async def make_plain_runs_topic() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(settings.topic("runs"), settings.partitions, 1)])
        finally:
            await admin.close()

    run(make_plain_runs_topic())
    with pytest.raises(ConfigError, match=r"runs has cleanup.policy=delete, expected compact"):
        run(topics.ensure_topics(settings))


def test_missing_topics_are_named_by_verify(make_settings) -> None:
    settings = make_settings(create_topics=False)
    with pytest.raises(ConfigError) as info:
        run(topics.verify_topics(settings))
    assert settings.topic("frames") in str(info.value)
    assert "modelevents topics create" in str(info.value)


def test_topics_command_creates_verifies_and_deletes(make_settings, cli_main, capsys) -> None:
    settings = make_settings(create_topics=False)
    args = kafka_args(settings) + ["--partitions", "2"]
    assert cli_main(["topics", "create", *args]) == 0
    out = capsys.readouterr().out
    assert f"created   {settings.topic('runs')} (compacted)" in out
    assert cli_main(["topics", "verify", *args]) == 0
    assert out.count("created") == len(TOPICS) and capsys.readouterr().out.count("verified") == len(TOPICS)
    assert cli_main(["topics", "verify", *kafka_args(settings), "--partitions", "3"]) == 2
    assert "has 2 partitions, expected 3" in capsys.readouterr().err
    assert cli_main(["topics", "delete", *kafka_args(settings)]) == 2  # without --yes
    assert cli_main(["topics", "delete", "--yes", *kafka_args(settings)]) == 0
    assert capsys.readouterr().out.count("deleted") == len(TOPICS)


# --- producer and feed -------------------------------------------------------------------------


def test_the_producer_is_idempotent_with_acks_all(pipeline_settings: PipelineSettings) -> None:
    fed = feeder.frames_for_file(PAUSE_TURN, received_at=0)

    async def scenario():
        producer = await clients.start_producer(pipeline_settings)
        try:
            # The broker assigned a producer id: idempotence was negotiated, not only asked for.
            ids = (producer._txn_manager.producer_id, producer._sender._acks)
            metas = [await clients.produce_frame(producer, pipeline_settings, f) for f in fed.frames]
        finally:
            await producer.stop()
        return ids, metas, await _read_all(pipeline_settings, "frames")

    (producer_id, acks), metas, records = run(scenario())
    assert producer_id >= 0 and acks == -1  # acks=-1 is acks="all"
    assert [m.offset for m in metas] == list(range(len(fed.frames)))  # one partition, in order
    assert [r.value for r in records] == fed.frames
    assert all(r.key == fed.run_id.encode() for r in records)


def test_an_idempotent_producer_needs_acks_all(pipeline_settings: PipelineSettings) -> None:
    with pytest.raises(ConfigError, match="acks='all'"):
        run(clients.start_producer(pipeline_settings, acks=1))


def test_feed_with_duplicates_keeps_every_run_in_order(pipeline_settings: PipelineSettings) -> None:
    inputs = [feeder.frames_for_file(p) for p in (PAUSE_TURN, REFUSAL, CASSETTE)]

    async def scenario():
        producer = await clients.start_producer(pipeline_settings)
        try:
            stats = [await feeder.feed_frames(producer, pipeline_settings, fed.frames,
                                              duplicate=0.4, seed=7) for fed in inputs]
        finally:
            await producer.stop()
        return stats, await _read_all(pipeline_settings, "frames")

    stats, records = run(scenario())
    assert all(s.duplicates > 0 for s in stats)
    assert len(records) == sum(s.sent for s in stats)
    by_key: dict[bytes, list[clients.Record]] = defaultdict(list)
    for record in records:
        by_key[record.key].append(record)
    assert set(by_key) == {fed.run_id.encode() for fed in inputs}
    for fed, sent in zip(inputs, stats):
        got = by_key[fed.run_id.encode()]
        assert [r.offset for r in got] == sorted(r.offset for r in got)
        first: dict[str, bytes] = {}
        order: list[str] = []
        for r in got:
            frame_id = r.value.frame_id
            if frame_id in first:
                assert r.raw == first[frame_id], "a duplicate must be the identical record"
            else:
                first[frame_id] = r.raw
                order.append(frame_id)
        assert order == [f.frame_id for f in fed.frames]  # every frame, in order
        assert len(got) - len(order) == sent.duplicates
        assert {r.value.run_key for r in got} == {fed.run_id}


def test_fed_frames_are_stamped_as_the_gateway_stamps_them() -> None:
    fed = feeder.frames_for_file(CASSETTE, tenant="acme", received_at=123)
    assert fed.api == "anthropic-messages"
    assert {f.provider for f in fed.frames} == {"anthropic"}
    assert {(f.tenant, f.received_at, f.run_key) for f in fed.frames} == {("acme", 123, fed.run_id)}
    assert {f.stream_id for f in fed.frames} == {"i2", "i3"}  # i1 is a file upload, not a model call
    assert all(f.frame_id == f"{f.stream_id}:{f.index}" and f.transport == "sse" for f in fed.frames)
    assert {f.http_status for f in fed.frames} == {200}
    poll = feeder.frames_for_file(FIXTURES / "openai-responses" / "poll-3-completed.json")
    assert [f.transport for f in poll.frames] == ["poll"]


def test_feed_command_publishes_and_summarizes(pipeline_settings, cli_main, capsys) -> None:
    code = cli_main(["feed", str(REFUSAL), *kafka_args(pipeline_settings), "--run-id", "run-cli",
                     "--duplicate", "1", "--seed", "3", "--tenant", "t1", "--rate", "500"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    fed = feeder.frames_for_file(REFUSAL)
    assert "run        run-cli" in captured.out
    # One stream: an end-of-stream and an end-of-run marker follow it, never duplicated.
    assert f"frames     {len(fed.frames)} (+2 end-of-input markers)" in captured.out
    assert f"duplicates {len(fed.frames)}" in captured.out  # --duplicate 1: every frame twice
    records = run(_read_all(pipeline_settings, "frames", run_id="run-cli"))
    assert len(records) == 2 * len(fed.frames) + 2
    assert [is_end_of_input(r.value) for r in records[-2:]] == [True, True]
    assert {r.value.tenant for r in records} == {"t1"}


def test_feed_command_names_a_missing_topic(make_settings, cli_main, capsys) -> None:
    settings = make_settings(create_topics=False)
    assert cli_main(["feed", str(REFUSAL), *kafka_args(settings)]) == 2
    err = capsys.readouterr().err
    assert f"topic {settings.topic('frames')} does not exist" in err
    assert "modelevents topics create" in err


# --- tail --------------------------------------------------------------------------------------


async def _publish(settings: PipelineSettings, topic: str, items: list[tuple[str, object]]) -> None:
    producer = await clients.start_producer(settings)
    try:
        futures = [await clients.send_record(producer, settings, topic, key, obj) for key, obj in items]
        await clients.await_acks(settings, futures)
    finally:
        await producer.stop()


def _lines(buffer: io.BytesIO) -> list[dict]:
    return [orjson.loads(line) for line in buffer.getvalue().splitlines()]


def test_tail_prints_events_as_normalize_does_and_stops_when_idle(pipeline_settings) -> None:
    result = normalize_file(PAUSE_TURN)
    run(_publish(pipeline_settings, "events", [(e.run_id, e) for e in result.events]))
    out = io.BytesIO()
    count, reached = run(tail_command.tail(pipeline_settings, "events", out, timeout=1.0))
    assert (count, reached) == (len(result.events), False)
    assert _lines(out) == [orjson.loads(orjson.dumps(e.projection())) for e in result.events]


def test_tail_until_terminal_stops_at_run_finished(pipeline_settings) -> None:
    mine = normalize_file(PAUSE_TURN, run_id="run-a").events
    other = normalize_file(REFUSAL, run_id="run-b").events
    finished = next(i for i, e in enumerate(mine) if e.kind == "run.finished")
    # An event after the terminal one (and another run's events) must not be printed.
    items = [(e.run_id, e) for e in mine[:finished + 1]] + [(e.run_id, e) for e in other]
    items.append(("run-a", mine[0]))
    run(_publish(pipeline_settings, "events", items))
    out = io.BytesIO()
    # timeout=0 waits for ever: only the terminal event can end this call (the guard aside).
    count, reached = run(tail_command.tail(pipeline_settings, "events", out, run_id="run-a",
                                           until_terminal=True, timeout=0))
    lines = _lines(out)
    assert reached and count == finished + 1
    assert [line["event_id"] for line in lines] == [e.event_id for e in mine[:finished + 1]]
    assert lines[-1]["kind"] == "run.finished"


def test_tail_runs_until_terminal_via_the_command(pipeline_settings, cli_main, capsysbinary) -> None:
    states = [RunState("run-x", "default", status="in_progress", last_seq=3),
              RunState("run-y", "default", status="completed"),
              RunState("run-x", "default", status="completed", reason="stop", last_seq=9)]
    run(_publish(pipeline_settings, "runs", [(s.run_id, s) for s in states]))
    code = cli_main(["tail", "--topic", "runs", "--run-id", "run-x", "--until-terminal",
                     "--timeout", "0", *kafka_args(pipeline_settings)])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err
    lines = [orjson.loads(line) for line in captured.out.splitlines()]
    assert [(s["run_id"], s["status"], s["last_seq"]) for s in lines] == [
        ("run-x", "in_progress", 3), ("run-x", "completed", 9)]
    assert b"run ended" in captured.err


def test_tail_until_terminal_reports_a_run_that_did_not_end(pipeline_settings, cli_main,
                                                            capsysbinary) -> None:
    run(_publish(pipeline_settings, "runs", [("run-z", RunState("run-z", "default", "in_progress"))]))
    code = cli_main(["tail", "--topic", "runs", "--run-id", "run-z", "--until-terminal",
                     "--timeout", "1", *kafka_args(pipeline_settings)])
    captured = capsysbinary.readouterr()
    assert code == tail_command.EXIT_NOT_TERMINAL
    assert len(captured.out.splitlines()) == 1
    assert b"did not reach a terminal state" in captured.err


def test_tail_latest_skips_what_was_there(pipeline_settings) -> None:
    old = RunState("run-l", "default", status="in_progress", last_seq=0)
    new = RunState("run-l", "default", status="completed", last_seq=1)

    async def scenario() -> list[dict]:
        await _publish(pipeline_settings, "runs", [("run-l", old)])
        out = io.BytesIO()
        task = asyncio.create_task(tail_command.tail(
            pipeline_settings, "runs", out, run_id="run-l", until_terminal=True, timeout=0,
            from_beginning=False))
        # When the tail has found the end of the topic is not observable from here: publish the
        # new state until the tail has seen it.
        while not task.done():
            await _publish(pipeline_settings, "runs", [("run-l", new)])
            await asyncio.wait([task], timeout=0.5)
        await task
        return _lines(out)

    lines = run(scenario())
    assert [line["last_seq"] for line in lines] == [1]


def test_tail_dlq_and_undecodable_records(pipeline_settings) -> None:
    letter = DeadLetter(stage="decode", reason="not Avro", error_type="SchemaError", at=1,
                        run_key="run-d", topic="t", partition=0, offset=5, record=b"\x00\xffjunk")

    async def publish_junk() -> None:
        producer = await clients.start_producer(pipeline_settings)
        try:
            await producer.send_and_wait(pipeline_settings.topic("dlq"), key=b"run-d", value=b"junk")
        finally:
            await producer.stop()

    run(_publish(pipeline_settings, "dlq", [("run-d", letter)]))
    run(publish_junk())
    out = io.BytesIO()
    count, _ = run(tail_command.tail(pipeline_settings, "dlq", out, run_id="run-d", timeout=1.0))
    first, second = _lines(out)
    assert count == 2
    assert base64.b64decode(first["record"]) == b"\x00\xffjunk"
    assert first["stage"] == "decode" and first["offset"] == 5
    assert "not an Avro single-object record" in second["error"]
    assert base64.b64decode(second["record"]) == b"junk" and second["_offset"] == 1


def test_tail_prints_frames_with_their_body(pipeline_settings) -> None:
    fed = feeder.frames_for_file(REFUSAL, received_at=0)
    run(_publish(pipeline_settings, "frames", [(f.run_key, f) for f in fed.frames]))
    out = io.BytesIO()
    run(tail_command.tail(pipeline_settings, "frames", out, timeout=1.0, meta=True))
    lines = _lines(out)
    assert [line["body"].encode() for line in lines] == [f.body for f in fed.frames]
    assert {line["_topic"] for line in lines} == {pipeline_settings.topic("frames")}
    assert codec.decode(codec.encode(fed.frames[0])) == fed.frames[0]


def test_tail_prints_run_id_claims_as_the_gateway_wrote_them(pipeline_settings, cli_main,
                                                              capsysbinary) -> None:
    # The bytes the gateway writes (state.Gateway._publish_claim): key the run id, value JSON.
    claims = [("run-o1", encode_claim("run-o1", "acme")), ("run-o2", encode_claim("run-o2", "beta")),
              ("run-o1", encode_claim("run-o1", "beta")),  # a lost race: printed, never owner
              ("run-o2", b"junk"), ("run-o3", encode_claim("run-o4", "acme"))]

    async def publish_claims() -> None:
        producer = await clients.start_producer(pipeline_settings)
        try:
            for key, value in claims:
                await producer.send_and_wait(pipeline_settings.topic("run-owners"),
                                             key=clients.run_key_bytes(key), value=value)
        finally:
            await producer.stop()

    run(publish_claims())
    out = io.BytesIO()
    count, _ = run(tail_command.tail(pipeline_settings, "run-owners", out, timeout=1.0))
    lines = sorted(_lines(out), key=lambda line: (line.get("run_id", "~"), line.get("error", "")))
    assert count == len(claims)
    assert [{k: v for k, v in line.items() if k != "claimed_at"} for line in lines[:3]] == [
        {"v": 1, "run_id": "run-o1", "tenant": "acme"},
        {"v": 1, "run_id": "run-o1", "tenant": "beta"},
        {"v": 1, "run_id": "run-o2", "tenant": "beta"}]
    assert all(isinstance(line["claimed_at"], int) for line in lines[:3])
    junk, keyed = sorted(lines[3:], key=lambda line: line["_key"])  # run-o2, run-o3
    assert "keyed 'run-o3', not by its run id" in keyed["error"]
    assert "not a run-id claim" in junk["error"] and base64.b64decode(junk["record"]) == b"junk"

    code = cli_main(["tail", "--topic", "run-owners", "--run-id", "run-o1", "--timeout", "1",
                     *kafka_args(pipeline_settings)])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err
    assert [(c["run_id"], c["tenant"]) for c in map(orjson.loads, captured.out.splitlines())] == [
        ("run-o1", "acme"), ("run-o1", "beta")]


def test_tail_refuses_until_terminal_on_frames(pipeline_settings, cli_main, capsys) -> None:
    assert cli_main(["tail", "--topic", "frames", "--run-id", "r", "--until-terminal",
                     *kafka_args(pipeline_settings)]) == 2
    assert "--until-terminal works with --topic events, ingest, runs" in capsys.readouterr().err


# --- a broker that is not there ----------------------------------------------------------------


def test_a_broker_that_is_down_is_a_clear_error(cli_main, capsys) -> None:
    down = PipelineSettings(bootstrap_servers=f"127.0.0.1:{free_port()}", topic_prefix="down.")
    for attempt in (clients.start_producer(down), topics.ensure_topics(down), _read_all(down, "events")):
        with pytest.raises(clients.KafkaUnavailable) as info:
            run(attempt)
        assert down.bootstrap_servers in str(info.value)
        assert how_to_reach_kafka(down.bootstrap_servers) in str(info.value)
    for argv in (["tail", "--topic", "events"], ["topics", "verify"], ["feed", str(REFUSAL)]):
        assert cli_main([*argv, "--bootstrap-servers", down.bootstrap_servers]) == 2
        err = capsys.readouterr().err
        assert f"cannot reach Kafka at {down.bootstrap_servers}" in err
        assert how_to_reach_kafka(down.bootstrap_servers) in err
