"""The eval result record's Kafka value: the Avro single-object encoding of
``schemas/avro/migration/eval_result.avsc`` (topic ``eval-results``, key the result id).

With the record schemas rather than the eval (services/migration/eval/), which needs the
``eval`` extra (jsonschema): the gateway reads the topic with the same codec
(services/gateway/events/eval_results.py) without that extra or an import of the migration.
"""

from __future__ import annotations

from typing import Any

from modelevents.schemas.codec import AVRO_DIR
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.run_input import SingleObjectCodec

__all__ = ["SCHEMA_PATH", "TOPIC", "decode", "encode", "is_eval_result"]

SCHEMA_PATH = AVRO_DIR / "migration" / "eval_result.avsc"
TOPIC = "eval-results"
_CODEC = SingleObjectCodec(SCHEMA_PATH, "EvalResult")


def encode(record: dict[str, Any]) -> bytes:
    try:
        return _CODEC.encode(record)
    except (ValueError, TypeError, KeyError) as exc:
        raise SchemaError(f"an eval result that breaks its schema: {exc}") from exc


def decode(value: bytes) -> dict[str, Any]:
    """The record of an ``eval-results`` value; SchemaError for anything else."""
    return _CODEC.decode(value)


def is_eval_result(value: bytes | None) -> bool:
    return _CODEC.matches(value)
