"""Eval results on the compacted ``eval-results`` topic (key: the result id): write one, read them
all, get one by its id or a unique prefix of it."""

from __future__ import annotations

from typing import Any

from modelevents.schemas.errors import ConfigError
from modelevents.schemas.eval_results import TOPIC, decode, encode, is_eval_result
from modelevents.services.kafka.clients import (
    await_acks,
    read_records,
    start_producer,
    topic_name,
)
from modelevents.services.kafka.settings import PipelineSettings


async def publish(settings: PipelineSettings, record: dict[str, Any]) -> None:
    """Write ``record`` and wait for the broker's acknowledgement (acks=all)."""
    value = encode(record)
    producer = await start_producer(settings)
    try:
        future = await producer.send(topic_name(settings, TOPIC),
                                     key=record["result_id"].encode(), value=value)
        await await_acks(settings, [future])
    finally:
        await producer.stop()


async def read_all(settings: PipelineSettings, timeout: float = 5.0) -> dict[str, dict[str, Any]]:
    """Every result the topic holds now, by id (the latest record of each key)."""
    found: dict[str, dict[str, Any]] = {}
    async for rec in read_records(settings, TOPIC, timeout=timeout, to_end=True):
        if rec is not None and is_eval_result(rec.raw):
            assert rec.raw is not None
            record = decode(rec.raw)
            found[record["result_id"]] = record
    return found


def pick(results: dict[str, dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The result ``wanted`` names (its id or a unique prefix); ConfigError otherwise."""
    if wanted in results:
        return results[wanted]
    matches = [rid for rid in results if rid.startswith(wanted)]
    if len(matches) == 1:
        return results[matches[0]]
    if not matches:
        raise ConfigError(f"no eval result {wanted!r} on the {TOPIC} topic "
                          f"({len(results)} there); `modelevents eval show` lists them")
    raise ConfigError(f"{wanted!r} names {len(matches)} eval results ({', '.join(matches[:4])} "
                      "…); give more of the id")
