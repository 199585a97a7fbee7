"""The calls records (services/gateway/calls/records.py): their format, and how the view decides races.

The view is fed records as its consumer hands them over (key, value, partition, offset); what a
real broker does with them — the order of a partition, compaction — is in
tests/integration/gateway/test_replicas.py.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import orjson
import pytest

from modelevents.services.gateway.calls.records import (
    ENDED,
    PENDING_TTL_MS,
    CallRecord,
    CallsView,
    InstanceBeat,
    KeyRecord,
    decode_record,
)
from modelevents.services.kafka.settings import PipelineSettings


@dataclass
class Consumed:  # the fields of aiokafka's ConsumerRecord the view reads
    key: bytes | None
    value: bytes | None
    partition: int = 0
    offset: int = 0


def call(rev: int = 1, tag: str = "c0-00000001", **changes) -> CallRecord:
    record = CallRecord(run_id="run_a", tenant="acme", rev=rev, call=tag, instance="gw-0",
                        incarnation="i1", provider="openai", api="openai-responses",
                        model="gpt-5", background=True, stream=False, updated_at=1)
    return dataclasses.replace(record, **changes)


def key(state: str = "pending", nonce: str = "n1", at: int = 1_000, **changes) -> KeyRecord:
    return dataclasses.replace(KeyRecord("acme", "k/1", "d1", state, nonce, at), **changes)


def feed(view: CallsView, *records: CallRecord | KeyRecord | InstanceBeat | tuple[bytes, bytes]
         ) -> list[bool]:
    out = []
    for offset, record in enumerate(records):
        if isinstance(record, CallRecord):
            out.append(view.apply(Consumed(record.key(), record.encode(), offset=offset)))
        elif isinstance(record, (KeyRecord, InstanceBeat)):
            out.append(view.apply(Consumed(record.record_key(), record.encode(), offset=offset)))
        else:
            out.append(view.apply(Consumed(*record, offset=offset)))
    return out


@pytest.fixture
def view() -> CallsView:
    return CallsView(PipelineSettings(bootstrap_servers="127.0.0.1:1"))


def test_records_round_trip():
    record = call(object_id="resp_1", cursor="7", note="why")
    assert decode_record(record.key(), record.encode()) == record
    answered = key("answered", answer={"run_id": "run_a", "links": {"state": "/v1/runs/run_a"}})
    assert decode_record(answered.record_key(), answered.encode()) == answered
    assert answered.record_key() == b"idempotency/acme/k/1"


@pytest.mark.parametrize(("raw_key", "raw", "says"), [
    (b"run_a", b"\xff not json", "not JSON"),
    (b"run_a", b"[1, 2]", "not a JSON object"),
    (b"run_a", orjson.dumps({"v": 2, "type": "call"}), "record version 2"),
    (b"run_a", orjson.dumps({"v": 1, "type": "lease"}), "unknown record type 'lease'"),
    (b"run_b", call().encode(), "is not its run id"),
    (b"run_a", orjson.dumps({**orjson.loads(call().encode()), "rev": "3"}), "'rev' is '3'"),
    (b"run_a", orjson.dumps({**orjson.loads(call().encode()), "background": 1}), "'background'"),
    (b"run_a", orjson.dumps({**orjson.loads(call().encode()), "state": "running"}),
     "state 'running'"),
    (b"idempotency/acme/k/1", orjson.dumps({**orjson.loads(key().encode()), "state": "answered"}),
     "without its answer"),
    (b"idempotency/acme/k/2", key().encode(), "is not b'idempotency/acme/k/1'"),
])
def test_a_record_that_does_not_decode_says_why(raw_key, raw, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace("[", r"\[")):
        decode_record(raw_key, raw)


def test_a_record_that_does_not_decode_is_logged_skipped_and_loses_nothing(view, caplog):
    with caplog.at_level(logging.WARNING, "modelevents.gateway.calls"):
        applied = feed(view, call(), (b"run_a", b"garbage"), (b"run_b", call().encode()),
                       call(rev=2, state=ENDED))
    assert applied == [True, False, False, True]
    assert view.skipped == 2 and view.call("run_a") == call(rev=2, state=ENDED)
    assert "offset 1 skipped: not JSON" in caplog.text and "offset 2 skipped" in caplog.text


def test_of_two_writes_of_one_version_the_first_in_the_partition_is_the_runs_call(view):
    a, b = call(rev=2, tag="c1-aaaaaaaa"), call(rev=2, tag="c1-bbbbbbbb", incarnation="i2")
    assert feed(view, call(), a, b) == [True, True, False]
    assert view.call("run_a") == a
    # The loser writes the winner's record again (the last record compaction keeps is never
    # the loser's): that is the winner's next version.
    assert feed(view, a.next()) == [True]
    assert view.call("run_a").call == "c1-aaaaaaaa"
    # After compaction a reader meets the latest version first: any version is taken then.
    fresh = CallsView(PipelineSettings(bootstrap_servers="127.0.0.1:1"))
    assert feed(fresh, call(rev=9)) == [True]


def test_a_view_read_again_from_the_start_keeps_the_latest(view):
    records = [call(), call(rev=2, object_id="resp_1"), call(rev=3, state=ENDED)]
    feed(view, *records)
    assert feed(view, *records) == [False, False, False]
    assert view.call("run_a") == records[-1]


def test_listeners_are_told_every_call_record_applied(view):
    seen: list[CallRecord] = []
    view.listeners.append(seen.append)
    feed(view, call(), call(rev=5))
    assert seen == [call()]


def test_the_first_pending_key_holds_it_and_its_answer_stands_for_ever(view):
    answer = {"run_id": "run_a", "links": {"state": "/v1/runs/run_a"}}
    ours, theirs = key(nonce="n1"), key(nonce="n2", at=1_001)
    assert feed(view, ours, theirs) == [True, False]
    assert view.keys[("acme", "k/1")].nonce == "n1"
    assert feed(view, key("answered", nonce="n1", at=1_002, answer=answer)) == [True]
    # Later records of the key change nothing: not another pending one, not another answer.
    assert feed(view, key(nonce="n3", at=10_000_000),
                key("answered", nonce="n3", at=10_000_001, answer={"other": 1})) == [False, False]
    assert view.keys[("acme", "k/1")].answer == answer


def test_a_released_key_is_free_and_a_stale_pending_one_holds_nothing(view):
    assert feed(view, key(), key("released", at=1_100)) == [True, True]
    assert ("acme", "k/1") not in view.keys
    # A pending record whose gateway died answering it: a later request may take the key.
    assert feed(view, key(nonce="n1"), key(nonce="n2", at=1_000 + PENDING_TTL_MS)) == [True, True]
    assert view.keys[("acme", "k/1")].nonce == "n2"
    # Another request's release does not free it.
    assert feed(view, key("released", nonce="n1", at=99_999_999)) == [False]
    assert view.key("acme", "k/1") is None  # stale by now (its own time is long past)


def test_an_instances_latest_heartbeat_says_when_its_calls_were_heard_of(view):
    beat = InstanceBeat("gw-0", "i1", 5_000)
    assert decode_record(beat.record_key(), beat.encode()) == beat
    with pytest.raises(ValueError, match="is not b'instance/gw-0'"):
        decode_record(b"instance/gw-1", beat.encode())
    assert feed(view, beat, InstanceBeat("gw-0", "i1", 4_000)) == [True, False]
    assert view.heard_of(call(updated_at=1)) == 5_000
    assert view.heard_of(call(updated_at=9_000)) == 9_000  # the record is later than the beat
    assert view.heard_of(call(instance="gw-9", updated_at=7)) == 7  # never heard of otherwise


def test_a_claim_that_lost_writes_the_winners_record_again_for_compaction(view):
    """A replica whose view lagged claims a key already answered: its claim reaches the log
    after the answer. Compaction keeps a key's last record, so the loser writes the winner's
    again — a gateway that reads the compacted topic later must still find the key answered."""
    import asyncio

    answer = {"run_id": "run_a", "links": {"state": "/v1/runs/run_a"}}
    assert feed(view, key(nonce="n1"), key("answered", nonce="n1", at=1_002, answer=answer))
    log: list[tuple[bytes, bytes]] = []

    @dataclass
    class Written:
        partition: int
        offset: int

    async def publish(record_key: bytes, value: bytes) -> Written:  # the broker, then the read
        offset = 10 + len(log)
        log.append((record_key, value))
        view.apply(Consumed(record_key, value, offset=offset))
        view.read_to[0] = offset + 1
        return Written(0, offset)

    claim = asyncio.run(view.claim_key("acme", "k/1", "d1", publish, timeout=1.0))
    assert claim is not None
    known, ours = claim
    assert not ours and known.state == "answered" and known.answer == answer
    # What compaction keeps — the key's last record — is the answer, read alone by a new view.
    last_key, last_value = log[-1]
    fresh = CallsView(PipelineSettings(bootstrap_servers="127.0.0.1:1"))
    fresh.apply(Consumed(last_key, last_value))
    kept = fresh.key("acme", "k/1")
    assert kept is not None and kept.state == "answered" and kept.answer == answer
