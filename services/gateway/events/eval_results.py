"""The eval results on ``<prefix>eval-results``, as the gateway serves them (``GET /v1/evals``).

A view of the whole compacted topic (key: the result id; ``modelevents eval run`` writes them:
docs/migration.md): for each result the row the list shows, the ids of its runs (whose owners
decide which tenant may see it: ``routes/evals.py``) and its value as written, decoded again
only when the result is asked for — a result holds every run's verdict, the list needs none of
them. A tombstone (a null value) removes its result; a value that is not an ``EvalResult`` is
skipped. The codec is the eval's own (``schemas/eval_results.py``, which needs no
extra). A result names the tenant ``eval run`` ran as (``tenant``) when it ran as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelevents.schemas.errors import SchemaError
from modelevents.schemas.eval_results import TOPIC, decode
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["EvalResults", "StoredResult", "TOPIC", "result_row"]


def result_row(record: dict[str, Any]) -> dict[str, Any]:
    """One result as ``GET /v1/evals`` lists it: its id, corpus and version, mode, date, and
    each bundle's runs, accepted and rejected (and the totals)."""
    corpus, _, version = record["corpus"].rpartition("@")
    bundles = [{"bundle": b["bundle"], "name": b["name"], "runs": b["runs"],
                "accepted": b["accepted"], "rejected": b["rejected"],
                "not_started": len(b["not_started"])} for b in record["bundles"]]
    return {"result_id": record["result_id"], "corpus": corpus or record["corpus"],
            "corpus_version": version if corpus else None, "mode": record["mode"],
            "created_at": record["created_at"], "bundles": bundles,
            "runs": sum(b["runs"] for b in bundles),
            "accepted": sum(b["accepted"] for b in bundles),
            "rejected": sum(b["rejected"] for b in bundles)}


@dataclass(frozen=True)
class StoredResult:
    row: dict[str, Any]
    run_ids: frozenset[str]
    tenant: str | None  # the tenant ``eval run`` ran as, when the result names one
    value: bytes  # as written: decoded again for GET /v1/evals/{id}


class EvalResults(TopicView):
    """The latest record of every result id on ``eval-results`` (module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, TOPIC)
        self.results: dict[str, StoredResult] = {}

    def apply(self, message: Any) -> bool:
        if message.value is None:  # a tombstone: the result was removed
            key = message.key.decode("utf-8", "replace") if message.key else ""
            return self.results.pop(key, None) is not None
        try:
            record = decode(message.value)
        except SchemaError:
            return False
        self.results[record["result_id"]] = StoredResult(
            result_row(record), frozenset(r["run_id"] for r in record["runs"]),
            record.get("tenant"), message.value)
        return True
