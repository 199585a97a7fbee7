"""The fields of an eval result a decision reads, from the ``eval-results`` topic (key: result
id) or a JSON file (``eval run --json``): the result's id, its bundle, its runs and rejected
runs, the error and refusal counts, and the unknown-event and needs_reconciliation rates.

One module on purpose: the eval result record is the eval command's (services/migration/eval/);
this reader names only what a decision needs, so aligning with that record happens here alone.
A topic value is the EvalResult record (schemas/eval_results.py), read as ``eval show`` reads it
(services/migration/eval/store.py: an id or a unique prefix); a document
holding several bundles' results (``bundles``, a list) yields the one of the bundle asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from modelevents.schemas.errors import ConfigError, InputError
from modelevents.schemas.eval_results import TOPIC
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.eval.store import pick, read_all

__all__ = ["EvalSummary", "summary_of", "read_eval_file", "read_eval_topic", "TOPIC"]


@dataclass(frozen=True)
class EvalSummary:
    result_id: str
    bundle_id: str
    runs: int
    rejected: int
    errors: int
    refusals: int
    unknown_event_rate: float | None
    needs_reconciliation_rate: float | None


def _first(doc: dict[str, Any], *names: str) -> Any:
    for name in names:
        if doc.get(name) is not None:
            return doc[name]
    return None


def _count(doc: dict[str, Any], *names: str) -> int:
    value = _first(doc, *names)
    return int(value) if isinstance(value, int | float) else 0


def _rate(doc: dict[str, Any], *names: str) -> float | None:
    value = _first(doc, *names)
    return float(value) if isinstance(value, int | float) else None


def summary_of(doc: Any, source: str, bundle_id: str | None = None) -> EvalSummary:
    """The summary of one eval result document; ``bundle_id`` picks a bundle's part of a
    document with several. InputError naming ``source`` when a field is missing."""
    if not isinstance(doc, dict):
        raise InputError(f"eval result {source} is not a JSON object")
    parts = _first(doc, "results", "bundles")
    if isinstance(parts, list) and bundle_id is not None:
        for part in parts:
            if isinstance(part, dict) and _first(part, "bundle", "bundle_id") == bundle_id:
                return summary_of({**doc, **part, "results": None, "bundles": None}, source)
        raise InputError(f"eval result {source} has no result for bundle {bundle_id}")
    result_id = _first(doc, "result_id", "id")
    bundle = _first(doc, "bundle", "bundle_id")
    if isinstance(bundle, dict):
        bundle = _first(bundle, "bundle_id", "id")
    if not isinstance(result_id, str) or not isinstance(bundle, str):
        raise InputError(f"eval result {source} names no result_id and bundle: is it the output "
                         f"of `modelevents eval run --json`?")
    return EvalSummary(
        result_id=result_id, bundle_id=bundle, runs=_count(doc, "runs", "run_count"),
        rejected=_count(doc, "rejected", "rejected_count"),
        errors=_count(doc, "error_runs", "errors", "error_count"),
        refusals=_count(doc, "refusal_runs", "refusals", "refusal_count"),
        unknown_event_rate=_rate(doc, "unknown_event_rate"),
        needs_reconciliation_rate=_rate(doc, "needs_reconciliation_rate"))


def read_eval_file(path: Path, bundle_id: str | None = None) -> EvalSummary:
    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read eval result {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise InputError(f"eval result {path} is not JSON: {exc}") from None
    return summary_of(doc, str(path), bundle_id)


async def read_eval_topic(settings: PipelineSettings, reference: str,
                          bundle_id: str | None = None) -> EvalSummary:
    """The result ``reference`` (its id or a unique prefix, as ``eval show`` takes it) on
    eval-results; InputError when there is none, or several."""
    try:
        doc = pick(await read_all(settings), reference)
    except ConfigError as exc:
        raise InputError(f"{exc}; or pass the result's JSON file (`eval run --json`)") from None
    return summary_of(doc, f"{doc['result_id']} ({settings.topic(TOPIC)})", bundle_id)
