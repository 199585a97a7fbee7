"""Offset holes: a record missing from the middle of an archived partition (``docs/audit.md``).

Kafka gives the records of an uncompacted topic without transactions (the pipeline writes none)
consecutive offsets, so the archived offsets of each partition of ``events``, ``frames`` and
``receipts`` run without a gap from the first one archived — which the checkpoints name
(``started``): retention may have removed earlier records before the archive read them — to the
last (the checkpoint's next offset less one). Compaction legitimately leaves holes, so the
compacted ``run-inputs`` is not checked.
"""

from __future__ import annotations

from typing import Any

from modelevents.consumers.audit.format import Findings, ranges


def check_offset_holes(report: Findings, seen: dict[tuple[str, int], set[int]],
                       topics: set[str], checkpoint: dict[str, Any] | None) -> None:
    """Fail every partition of ``topics`` whose archived offsets (``seen``) leave a hole between
    the first offset archived and the last one the checkpoint says is archived."""
    started = (checkpoint or {}).get("started") or {}
    archived_to = (checkpoint or {}).get("offsets") or {}
    for (topic, partition), offsets in sorted(seen.items()):
        if topic not in topics or not offsets:
            continue
        name = f"{topic}:{partition}"
        low, high = min(offsets), max(offsets)
        first = min(started.get(name, low), low)
        last = max(archived_to.get(name, high + 1) - 1, high)
        if len(offsets) == last - first + 1:
            continue
        missing = sorted(set(range(first, last + 1)) - offsets)
        report.fail("offsets", name,
                    f"offsets {ranges(missing)} missing of {first}..{last} (archived from "
                    f"{first}, the last checkpoint names {last} as archived): records removed "
                    "from the archive, or the archive was rewritten without them")
