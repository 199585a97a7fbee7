"""The ``decisions`` topic (compacted, key decision id): publish a revision, read the latest
revision of every decision, find one by id or a unique prefix of it.

    await publish(producer, settings, decision)          # returns once acknowledged (acks=all)
    latest = await read_decisions(settings)              # {decision_id: Decision}, latest revision
    decision = find(latest, "dec-3f2a")                  # InputError: none, or ambiguous
"""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer

from modelevents.schemas.decision_record import (
    TOPIC,
    Decision,
    decode_decision,
    encode_decision,
    is_decision,
)
from modelevents.schemas.errors import InputError
from modelevents.services.kafka.clients import read_records, run_key_bytes
from modelevents.services.kafka.settings import TOPICS, PipelineSettings

__all__ = ["TOPIC", "publish", "read_decisions", "find", "full_topic"]



def full_topic(settings: PipelineSettings, name: str) -> str:
    """The full name of a migration topic (``decisions``, ``bundles``, ``eval-results``) under
    the settings' prefix, whether or not this installation lists it among the pipeline's."""
    return settings.topic(name) if name in TOPICS else f"{settings.topic_prefix}{name}"


async def publish(producer: AIOKafkaProducer, settings: PipelineSettings,
                  decision: Decision) -> Any:
    """The revision on ``decisions`` keyed by its decision id; its RecordMetadata once
    acknowledged."""
    return await producer.send_and_wait(full_topic(settings, TOPIC), encode_decision(decision),
                                        key=run_key_bytes(decision.decision_id))


async def read_decisions(settings: PipelineSettings, timeout: float = 10.0
                         ) -> dict[str, Decision]:
    """The latest revision of each decision the topic holds (records of other schemas are
    skipped); a higher revision wins over a lower one read later."""
    latest: dict[str, Decision] = {}
    async for record in read_records(settings, full_topic(settings, TOPIC), to_end=True,
                                     timeout=timeout):
        if record is None or not is_decision(record.raw):
            continue
        decision = decode_decision(record.raw or b"")
        known = latest.get(decision.decision_id)
        if known is None or decision.revision >= known.revision:
            latest[decision.decision_id] = decision
    return latest


def find(decisions: dict[str, Decision], reference: str) -> Decision:
    """The decision whose id is ``reference`` or starts with it."""
    if reference in decisions:
        return decisions[reference]
    matches = [d for key, d in decisions.items() if key.startswith(reference)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(f"no decision {reference!r}; `modelevents decide list` shows them")
    raise InputError(f"{reference!r} names {len(matches)} decisions "
                     f"({', '.join(sorted(d.decision_id for d in matches)[:5])}); give more of "
                     f"the id")
