"""The gateway's calls across replicas and restarts: records on the compacted ``<prefix>calls``.

Three kinds of record, JSON values, on a topic read by nothing else: the run's call (key the
run id), an idempotency key's answer and a gateway instance's heartbeat.

More on this module: docs/architecture.md, ``services/gateway/calls/records.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["CallRecord", "KeyRecord", "InstanceBeat", "CallsView", "IN_FLIGHT", "CANCEL_REQUESTED", "ENDED",
           "PENDING_TTL_MS", "decode_record", "now_ms", "idempotency_key_bytes", "new_incarnation"]

log = logging.getLogger("modelevents.gateway.calls")

RECORD_VERSION = 1
IN_FLIGHT, CANCEL_REQUESTED, ENDED = "in_flight", "cancel_requested", "ended"
CALL_STATES = (IN_FLIGHT, CANCEL_REQUESTED, ENDED)
PENDING, ANSWERED, RELEASED = "pending", "answered", "released"
# A gateway answers a request within its ack timeouts; one pending for this long died doing so.
PENDING_TTL_MS = 60_000
_KEY_PREFIX = "idempotency/"
_INSTANCE_PREFIX = "instance/"

# Write one record and wait for its acknowledgement: (key, value) → RecordMetadata.
Publish = Callable[[bytes, bytes], Awaitable[Any]]


def now_ms() -> int:
    return int(time.time() * 1000)


def new_incarnation() -> str:
    """Who this process is among the processes of one instance id over time."""
    return secrets.token_hex(8)


def idempotency_key_bytes(tenant: str, key: str) -> bytes:
    return f"{_KEY_PREFIX}{tenant}/{key}".encode()


@dataclass(frozen=True)
class CallRecord:
    """The latest call of a run (module docstring)."""

    run_id: str
    tenant: str
    rev: int
    call: str
    instance: str
    incarnation: str
    provider: str
    api: str
    model: str
    background: bool
    stream: bool
    state: str = IN_FLIGHT
    object_id: str | None = None
    cursor: str | None = None
    updated_at: int = 0
    note: str | None = None

    @property
    def in_flight(self) -> bool:
        return self.state != ENDED

    def next(self, **changes: Any) -> CallRecord:
        """The record's next version with ``changes``."""
        return dataclasses.replace(self, rev=self.rev + 1, updated_at=now_ms(), **changes)

    def encode(self) -> bytes:
        return orjson.dumps({"v": RECORD_VERSION, "type": "call", **dataclasses.asdict(self)})

    def key(self) -> bytes:
        return self.run_id.encode()

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/runs/{id}`` shows of it (``call_record``)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "incarnation"}


@dataclass(frozen=True)
class KeyRecord:
    """One idempotency key's state (module docstring)."""

    tenant: str
    key: str
    digest: str
    state: str
    nonce: str
    at: int
    answer: dict[str, Any] | None = None

    def encode(self) -> bytes:
        return orjson.dumps({"v": RECORD_VERSION, "type": "idempotency",
                             **dataclasses.asdict(self)})

    def record_key(self) -> bytes:
        return idempotency_key_bytes(self.tenant, self.key)


@dataclass(frozen=True)
class InstanceBeat:
    """A gateway instance's heartbeat (module docstring)."""

    instance: str
    incarnation: str
    at: int

    def encode(self) -> bytes:
        return orjson.dumps({"v": RECORD_VERSION, "type": "instance", **dataclasses.asdict(self)})

    def record_key(self) -> bytes:
        return f"{_INSTANCE_PREFIX}{self.instance}".encode()


_STR = (str,)
_OPTIONAL_STR = (str, type(None))


def decode_record(key: bytes | None, raw: bytes | None
                  ) -> CallRecord | KeyRecord | InstanceBeat:
    """The record ``raw`` under ``key``; ValueError saying what is wrong with one that is not."""
    try:
        doc = orjson.loads(raw or b"")
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a JSON object but {type(doc).__name__}")
    if doc.get("v") != RECORD_VERSION:
        raise ValueError(f"record version {doc.get('v')!r}, this gateway reads {RECORD_VERSION}")
    kind = doc.get("type")
    if kind == "call":
        record = _call_of(doc)
        if key != record.key():
            raise ValueError(f"its key {key!r} is not its run id {record.run_id!r}")
        return record
    if kind == "idempotency":
        record2 = _key_of(doc)
        if key != record2.record_key():
            raise ValueError(f"its key {key!r} is not {record2.record_key()!r}")
        return record2
    if kind == "instance":
        instance, incarnation, at = doc.get("instance"), doc.get("incarnation"), doc.get("at")
        if not (isinstance(instance, str) and instance and isinstance(incarnation, str)
                and isinstance(at, int) and not isinstance(at, bool)):
            raise ValueError("an instance record needs instance, incarnation and at")
        beat = InstanceBeat(instance, incarnation, at)
        if key != beat.record_key():
            raise ValueError(f"its key {key!r} is not {beat.record_key()!r}")
        return beat
    raise ValueError(f"unknown record type {kind!r} (call, idempotency, instance)")


def _call_of(doc: dict[str, Any]) -> CallRecord:
    types: dict[str, tuple[type, ...]] = {
        "run_id": _STR, "tenant": _STR, "call": _STR, "instance": _STR, "incarnation": _STR,
        "provider": _STR, "api": _STR, "model": _STR, "state": _STR, "object_id": _OPTIONAL_STR,
        "cursor": _OPTIONAL_STR, "note": _OPTIONAL_STR, "rev": (int,), "updated_at": (int,),
        "background": (bool,), "stream": (bool,)}
    values: dict[str, Any] = {}
    for name, allowed in types.items():
        value = doc.get(name)
        if not isinstance(value, allowed) or (allowed == (int,) and isinstance(value, bool)):
            raise ValueError(f"call record field {name!r} is {value!r}")
        values[name] = value
    if values["state"] not in CALL_STATES:
        raise ValueError(f"call record state {values['state']!r} is none of {CALL_STATES}")
    if not values["run_id"] or not values["call"]:
        raise ValueError("call record without run_id or call")
    return CallRecord(**values)


def _key_of(doc: dict[str, Any]) -> KeyRecord:
    values: dict[str, Any] = {}
    for name in ("tenant", "key", "digest", "state", "nonce"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise ValueError(f"idempotency record field {name!r} is {doc.get(name)!r}")
        values[name] = doc[name]
    if values["state"] not in (PENDING, ANSWERED, RELEASED):
        raise ValueError(f"idempotency record state {values['state']!r}")
    at, answer = doc.get("at"), doc.get("answer")
    if not isinstance(at, int) or isinstance(at, bool):
        raise ValueError(f"idempotency record field 'at' is {at!r}")
    if values["state"] == ANSWERED and not isinstance(answer, dict):
        raise ValueError("an answered idempotency record without its answer")
    return KeyRecord(**values, at=at, answer=answer if isinstance(answer, dict) else None)


class CallsView(TopicView):
    """Every run's latest call and every idempotency key on ``calls`` (module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, "calls")
        self.calls: dict[str, CallRecord] = {}
        self.keys: dict[tuple[str, str], KeyRecord] = {}
        self.instances: dict[str, InstanceBeat] = {}  # each instance's latest heartbeat
        self.skipped = 0  # records that did not decode
        # Told every call record applied (the gateway's calls learn of a remote cancel by it).
        self.listeners: list[Callable[[CallRecord], None]] = []

    def apply(self, message: Any) -> bool:
        try:
            record = decode_record(message.key, message.value)
        except ValueError as exc:
            self.skipped += 1
            log.warning("%s partition %d offset %d skipped: %s", self.topic, message.partition,
                        message.offset, exc)
            return False
        if isinstance(record, KeyRecord):
            return self._apply_key(record)
        if isinstance(record, InstanceBeat):
            known_beat = self.instances.get(record.instance)
            if known_beat is not None and known_beat.at >= record.at:
                return False
            self.instances[record.instance] = record
            return True
        current = self.calls.get(record.run_id)
        if current is not None and record.rev != current.rev + 1:
            return False  # a lost race (or a re-read): the partition's first n+1 stands
        self.calls[record.run_id] = record
        for listener in self.listeners:
            listener(record)
        return True

    def _apply_key(self, record: KeyRecord) -> bool:
        ident = (record.tenant, record.key)
        known = self.keys.get(ident)
        if record.state == RELEASED:
            if known is not None and known.nonce == record.nonce and known.state == PENDING:
                del self.keys[ident]
                return True
            return False
        if known is not None and known.nonce != record.nonce:
            if known.state == ANSWERED or record.at - known.at < PENDING_TTL_MS:
                return False  # the first answer stands; a live pending one holds the key
        elif known is not None and known.state == ANSWERED:
            return False
        self.keys[ident] = record
        return True

    def call(self, run_id: str) -> CallRecord | None:
        return self.calls.get(run_id)

    def heard_of(self, record: CallRecord) -> int:
        """When the call's gateway was last heard of (epoch ms): its instance's latest heartbeat,
        or the record's own time if later."""
        beat = self.instances.get(record.instance)
        return max(record.updated_at, beat.at if beat is not None else 0)

    def key(self, tenant: str, key: str) -> KeyRecord | None:
        """The key's record; a pending one whose gateway died answering it counts as none."""
        known = self.keys.get((tenant, key))
        if known is not None and known.state == PENDING and now_ms() - known.at >= PENDING_TTL_MS:
            return None
        return known

    async def write(self, record: CallRecord, publish: Publish, timeout: float) -> bool | None:
        """Write ``record`` and read it back: True when it is the run's call now, False when
        another record of the same version came first (the winner is :meth:`call`), None when
        it was not read back within ``timeout`` (the caller answers 503)."""
        written = await publish(record.key(), record.encode())
        if not await self.wait_read(written.partition, written.offset, timeout):
            return None
        if self.calls.get(record.run_id) == record:
            return True
        winner = self.calls.get(record.run_id)
        if winner is not None:
            # Compaction keeps a key's last record: make it the winner's, never ours (and read
            # it back, so that the caller's next try starts from it).
            again = await publish(record.key(), winner.next().encode())
            await self.wait_read(again.partition, again.offset, timeout)
        return False

    async def claim_key(self, tenant: str, key: str, digest: str, publish: Publish,
                        timeout: float) -> tuple[KeyRecord, bool] | None:
        """Write a pending record of the key and read it back: ``(the key's record, whether it
        is ours)``; None when it was not read back within ``timeout``."""
        mine = KeyRecord(tenant, key, digest, PENDING, secrets.token_hex(8), now_ms())
        written = await publish(mine.record_key(), mine.encode())
        if not await self.wait_read(written.partition, written.offset, timeout):
            return None
        known = self.keys.get((tenant, key))
        if known is None:  # released at once by its writer: ours did not count either
            return None
        if known.nonce != mine.nonce:
            # Ours lost, but compaction keeps a key's last record — ours, a claim that never
            # counted: write the winner's again, so that a gateway starting after compaction
            # still finds the key answered (or held) and sends nothing twice.
            again = await publish(known.record_key(), known.encode())
            await self.wait_read(again.partition, again.offset, timeout)
            return known, False
        return known, True

    @staticmethod
    def answered(claim: KeyRecord, answer: dict[str, Any]) -> KeyRecord:
        return dataclasses.replace(claim, state=ANSWERED, answer=answer, at=now_ms())

    @staticmethod
    def released(claim: KeyRecord) -> KeyRecord:
        return dataclasses.replace(claim, state=RELEASED, at=now_ms())
