"""A bundle for a decision: from a file (YAML or JSON of ``schemas/bundles.py``'s Bundle) or
from the ``bundles`` topic by id or a unique prefix of it.

The bundles topic's record is the bundle command's; what is read here is its value as JSON, or
as Avro single-object encoding under the schema file ``schemas/avro/migration/bundle.avsc``
(fields as Bundle's; nested objects that travel as JSON text are parsed back). Either way the
result is validated as a Bundle and its id must be the key it was found under.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, cast

import fastavro
import orjson
import yaml
from pydantic import ValidationError

from modelevents.schemas.bundles import BUNDLE_ID_PREFIX, Bundle
from modelevents.schemas.codec import AVRO_DIR, MAGIC, fingerprint_of, without_logical_types
from modelevents.schemas.errors import InputError
from modelevents.services.kafka.clients import read_records
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.decisions.store import full_topic

__all__ = ["load_bundle", "bundle_from_file", "bundle_from_topic", "TOPIC"]

TOPIC = "bundles"
_AVRO = AVRO_DIR / "migration" / "bundle.avsc"


def _validated(doc: Any, source: str) -> Bundle:
    try:
        return Bundle.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise InputError(f"bundle {source} is not a bundle — {problems}") from None


def bundle_from_file(path: Path) -> Bundle:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
    except OSError as exc:
        raise InputError(f"cannot read bundle {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"bundle {path} is neither YAML nor JSON: {exc}") from None
    return _validated(doc, str(path))


def _json_fields(record: dict[str, Any]) -> dict[str, Any]:
    # Avro has no free-form object: the bundle command may carry one as JSON text.
    out = {}
    for key, value in record.items():
        if isinstance(value, str) and value[:1] in "{[":
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        out[key] = value
    return out


def _decode(raw: bytes, source: str) -> Bundle:
    if raw[:2] == MAGIC and _AVRO.exists():
        schema = json.loads(_AVRO.read_text())
        parsed = fastavro.parse_schema(without_logical_types(schema), {})
        if raw[2:10] == fingerprint_of(cast(dict[str, Any], fastavro.parse_schema(schema, {}))):
            read = cast(dict[str, Any], fastavro.schemaless_reader(io.BytesIO(raw[10:]), parsed))
            record = {k: v for k, v in _json_fields(read).items() if k in Bundle.model_fields}
            return _validated(record, source)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InputError(f"bundle {source} is a record this version cannot read; pass the "
                         f"bundle's file with --bundle FILE") from None
    return _validated(doc, source)


async def bundle_from_topic(settings: PipelineSettings, reference: str,
                            timeout: float = 10.0) -> Bundle:
    """The bundle whose id is ``reference`` or starts with it, from the bundles topic."""
    topic = full_topic(settings, TOPIC)
    found: dict[str, bytes] = {}
    async for record in read_records(settings, topic, to_end=True, timeout=timeout):
        if record is None or record.raw is None or record.key is None:
            continue
        key = record.key.decode("utf-8", "replace")
        if key.startswith(reference):
            found[key] = record.raw
    if not found:
        raise InputError(f"no bundle {reference!r} on {topic}; create it with `modelevents "
                         f"bundle create FILE`, or pass the bundle's file with --bundle FILE")
    if len(found) > 1 and reference not in found:
        raise InputError(f"{reference!r} names {len(found)} bundles on {topic}; give more of "
                         f"the id")
    key = reference if reference in found else next(iter(found))
    bundle = _decode(found[key], f"{key} ({topic})")
    if bundle.bundle_id != key:
        raise InputError(f"the record under {key} on {topic} is bundle {bundle.bundle_id}: its "
                         f"content does not hash to its key")
    return bundle


async def load_bundle(settings: PipelineSettings, reference: str) -> Bundle:
    """A bundle file when ``reference`` is a path that exists, else a bundle id (or prefix)."""
    path = Path(reference)
    if not reference.startswith(BUNDLE_ID_PREFIX) or path.exists():
        if path.exists():
            return bundle_from_file(path)
        raise InputError(f"--bundle {reference}: no such file, and not a bundle id "
                         f"({BUNDLE_ID_PREFIX}…)")
    return await bundle_from_topic(settings, reference)
