"""Freeze encoded samples of the current schema version. Run once per release:

    python -m tests.schemas.make_samples v5

Samples of a released version are never rewritten: the test suite proves that they stay
decodable by every later reader.
"""

from __future__ import annotations

import json
import sys

from modelevents.schemas import codec
from tests.paths import SCHEMA_SAMPLES
from tests.schemas.sample_records import PAYLOADS, model_event, other_records


def main(version: str) -> None:
    target = SCHEMA_SAMPLES / version
    if target.exists():
        sys.exit(f"{target} exists: samples of a released version are frozen")
    target.mkdir(parents=True)
    records = {f"model_event.{kind}": model_event(kind, seq=i) for i, kind in enumerate(PAYLOADS)}
    records.update(other_records())
    for name, record in records.items():
        (target / f"{name}.bin").write_bytes(codec.encode(record))
        meta = {"type": type(record).__name__}
        if hasattr(record, "kind"):
            meta.update(kind=record.kind, event_id=record.event_id)
        (target / f"{name}.json").write_text(json.dumps(meta) + "\n")
    print(f"wrote {len(records)} samples to {target}")


if __name__ == "__main__":
    main(sys.argv[1])
