"""The decision records on ``<prefix>decisions``, as the gateway serves them
(``GET /v1/decisions``).

A view of the whole compacted topic (key: the decision id; ``modelevents decide`` writes
revision 0, the decisions watcher each demotion: docs/migration.md): the latest revision of
every decision — a higher revision wins over a lower one read later, as the decisions store
reads them (``services/migration/decisions/store.py``). A tombstone (a null value) removes its
decision; a value that is not a ``Decision`` of this schema is skipped. The view is followed
live, so a demotion the watcher writes is served as soon as it is read.
"""

from __future__ import annotations

from typing import Any

from modelevents.schemas.decision_record import TOPIC, Decision, decode_decision, is_decision
from modelevents.schemas.errors import SchemaError
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["DecisionRecords", "decision_row"]


def decision_row(decision: Decision) -> dict[str, Any]:
    """One decision as ``GET /v1/decisions`` lists it."""
    demotion = decision.demotion
    return {"decision_id": decision.decision_id, "bundle_id": decision.bundle_id,
            "bundle_name": decision.bundle_name,
            "target": {"provider": decision.target.provider, "api": decision.target.api,
                       "model": decision.target.model, "snapshot": decision.target.snapshot},
            "owner": decision.owner, "status": decision.status, "revision": decision.revision,
            "decided_at": decision.decided_at, "updated_at": decision.updated_at,
            "demoted_at": demotion.at if demotion is not None else None,
            "trigger": demotion.trigger if demotion is not None else None}


class DecisionRecords(TopicView):
    """The latest revision of every decision on ``decisions`` (module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, TOPIC)
        self.decisions: dict[str, Decision] = {}

    def apply(self, message: Any) -> bool:
        if message.value is None:  # a tombstone: the decision was removed
            key = message.key.decode("utf-8", "replace") if message.key else ""
            return self.decisions.pop(key, None) is not None
        if not is_decision(message.value):
            return False
        try:
            decision = decode_decision(message.value)
        except SchemaError:
            return False
        known = self.decisions.get(decision.decision_id)
        if known is not None and decision.revision < known.revision:
            return False
        self.decisions[decision.decision_id] = decision
        return True
