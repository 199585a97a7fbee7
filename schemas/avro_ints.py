"""Which payload fields the Avro schema holds to 32 bits.

Python has one ``int``; the schema has two: ``int`` (32-bit signed) for positions and counts
(``output_index``, ``part_index``, ``http_status`` …) and ``long`` (64-bit) for token counts.
The encoder writes any varint it is given, and lenient readers (fastavro, Python's ``avro``)
read it back, but a Java reader refuses an ``int`` beyond 32 bits, and the official writer's
validation refuses to write it. The adapters' type check (adapters/base.py) bounds these fields
by this table, read from ``avro/model_event.avsc`` itself so that it cannot fall out of step.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

__all__ = ["INT32_LIMIT", "int32_fields"]

INT32_LIMIT = 1 << 31  # an Avro int is -2**31 <= n < 2**31

_MODEL_EVENT = Path(__file__).parent / "avro" / "model_event.avsc"


@cache
def int32_fields() -> dict[str, frozenset[str]]:
    """Payload record name (``"Text"``) → its fields whose Avro type is ``int`` or a union of
    ``int`` and ``null``."""
    schema = json.loads(_MODEL_EVENT.read_text())
    payload = next(f for f in schema["fields"] if f["name"] == "payload")
    out: dict[str, frozenset[str]] = {}
    for record in payload["type"]:
        out[record["name"]] = frozenset(
            f["name"] for f in record["fields"]
            if f["type"] == "int" or (isinstance(f["type"], list) and "int" in f["type"]))
    return out
