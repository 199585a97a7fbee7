"""The retest triggers a decision records, derived from its bundle, and how live values are
compared with them.

A bundle names the model snapshot, the event adapters (api -> name@revision), the ModelEvent
schema (name@version), the tool contracts' schema versions and the capability manifest entry;
the decision records each as the value live traffic must keep, with the eval's unknown-event and
needs_reconciliation rates. The ModelEvent schema's version is its place in the schema history:
``schemas/avro/history/model_event.vK.avsc`` is vK, the current file the next one — an event's
header (its writer schema's fingerprint) says which wrote it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, cast

import fastavro
import orjson

from modelevents.schemas.bundles import Bundle
from modelevents.schemas.codec import AVRO_DIR, HISTORY_DIR, MAGIC, fingerprint_of
from modelevents.schemas.decision_record import RetestTriggers

__all__ = ["triggers_of", "event_schema_of", "current_event_schema", "same_event_schema",
           "capabilities_json", "capability_difference", "EVENT_SCHEMA_NAME"]

EVENT_SCHEMA_NAME = "modelevents.ModelEvent"
_HISTORY_VERSION = re.compile(r"model_event\.v(\d+)\.avsc$")


def _fingerprint(path: Any) -> bytes:
    parsed = cast(dict[str, Any], fastavro.parse_schema(json.loads(path.read_text()), {}))
    return MAGIC + fingerprint_of(parsed)


@cache
def _versions() -> dict[bytes, str]:
    """Single-object header → name@vK of every released ModelEvent schema and the current."""
    found: dict[bytes, str] = {}
    latest = 0
    for path in HISTORY_DIR.glob("model_event.v*.avsc"):
        if (match := _HISTORY_VERSION.search(path.name)) is not None:
            version = int(match.group(1))
            latest = max(latest, version)
            found[_fingerprint(path)] = f"{EVENT_SCHEMA_NAME}@v{version}"
    found[_fingerprint(AVRO_DIR / "model_event.avsc")] = f"{EVENT_SCHEMA_NAME}@v{latest + 1}"
    return found


def current_event_schema() -> str:
    """name@version of the ModelEvent schema this installation writes."""
    return _versions()[_fingerprint(AVRO_DIR / "model_event.avsc")]


def event_schema_of(record: bytes) -> str:
    """name@version of the schema that wrote ``record`` (a ModelEvent, single-object encoded);
    an unknown writer is named by its fingerprint."""
    head = record[:10]
    return _versions().get(head) or f"{EVENT_SCHEMA_NAME}@{head[2:].hex()}"


def _version_part(text: str) -> str:
    version = text.rpartition("@")[2] if "@" in text else text
    return version.lower().removeprefix("v")


@cache
def _version_of_fingerprint() -> dict[str, str]:
    return {head[2:].hex(): _version_part(name) for head, name in _versions().items()}


def _schema_version(text: str) -> str:
    # ``bundle create`` names the schema by its fingerprint (name@<16 hex digits>), events by
    # their place in the history (name@vK): a known fingerprint is read as its version.
    version = _version_part(text)
    return _version_of_fingerprint().get(version, version)


def same_event_schema(recorded: str, observed: str) -> bool:
    """Whether two name@version spellings name one schema (``@v4``, ``@4`` and ``@`` the
    fingerprint of v4 are one)."""
    return _schema_version(recorded) == _schema_version(observed)


def capabilities_json(entry: dict[str, Any]) -> str:
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS).decode()


def _capability_fields(entry: dict[str, Any]) -> dict[str, Any]:
    # A bundle may nest the capabilities beside the manifest's version, or keep them flat.
    inner = entry.get("capabilities")
    fields = inner if isinstance(inner, dict) else entry
    return {key: sorted(value) if isinstance(value, list) else value
            for key, value in fields.items()}


def capability_difference(recorded: str, current: dict[str, Any] | None
                          ) -> tuple[str, str] | None:
    """``(expected, observed)`` of the capability fields the recorded entry and the manifest's
    resolution now both name, when any differs (or the target left the manifest); None when
    they agree."""
    if current is None:
        return recorded, "not in the capability manifest"
    before = _capability_fields(orjson.loads(recorded))
    now = _capability_fields(current)
    changed = sorted(key for key in before.keys() & now.keys() if before[key] != now[key])
    if not changed:
        return None
    return (capabilities_json({k: before[k] for k in changed}),
            capabilities_json({k: now[k] for k in changed}))


def triggers_of(bundle: Bundle, *, unknown_event_rate: float | None,
                needs_reconciliation_rate: float | None) -> RetestTriggers:
    """The default triggers of a decision on ``bundle`` with the eval's recorded rates."""
    return RetestTriggers(
        model_snapshot=bundle.target.snapshot,
        event_adapters=dict(bundle.event_adapters),
        event_schema=bundle.event_schema,
        tool_contracts={tool.declaration.name: tool.schema_version for tool in bundle.tools},
        capabilities=capabilities_json(bundle.capabilities) if bundle.capabilities else None,
        unknown_event_rate=unknown_event_rate,
        needs_reconciliation_rate=needs_reconciliation_rate)
