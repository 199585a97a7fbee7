"""What adapter parity compares of two events that claim to be the same one.

Two translations of the same frames — the published events and a re-normalization, or two
revisions of the adapters — agree on an event when its id, kind, payload and source agree.
``seq`` is the position (compared by the caller), ``received_at`` comes from the frame and the
adapter revision differs by design between revisions; the worker's trust verdicts
(``JUDGED_FIELDS``) come from its policy file, not from the frames, so they are left out.
Used by ``replay parity`` (consumers/replay/checks.py) and ``eval parity``
(services/migration/parity/).
"""

from __future__ import annotations

from typing import Any

from modelevents.schemas.events import JUDGED_FIELDS, ModelEvent, payload_dict


def _source(event: ModelEvent) -> tuple:
    s = event.source
    return (s.frame_id, s.index, s.transport, s.cursor)


def _payload(event: ModelEvent) -> tuple[str, dict[str, Any]]:
    fields = {k: v for k, v in payload_dict(event.payload).items() if k not in JUDGED_FIELDS}
    return type(event.payload).__name__, fields


def event_diff_fields(expected: ModelEvent, published: ModelEvent) -> tuple[str, ...]:
    """The names of what differs (``event_id``, ``kind``, ``payload``, ``source``); () when the
    two are the same event."""
    out = []
    if expected.event_id != published.event_id:
        out.append("event_id")
    if expected.kind != published.kind:
        out.append("kind")
    if _payload(expected) != _payload(published):
        out.append("payload")
    if _source(expected) != _source(published):
        out.append("source")
    return tuple(out)
