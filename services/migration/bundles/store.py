"""The ``bundles`` topic: write a bundle, read them all, find one by its id or a unique prefix.

Compacted, keyed by the bundle id (``schemas/bundle_record.py`` encodes the value). A bundle is
immutable and content-addressed, so writing the same bundle twice writes the same content
again (compaction keeps one): ``put`` is idempotent and a user may run ``bundle create`` as often
as they like. Records that are not bundles (another writer's, or a content that does not hash
to its key) are skipped and reported, never taken for a bundle.

    stored = await put(settings, bundle)            # acknowledged (acks=all)
    everything = await read_all(settings)          # {bundle id: StoredBundle}, oldest first
    stored = find(everything, "bnd-3f2a")          # by id or unique prefix (InputError else)
"""

from __future__ import annotations

import logging
import time

from modelevents.schemas import bundle_record
from modelevents.schemas.bundle_record import StoredBundle
from modelevents.schemas.bundles import BUNDLE_ID_PREFIX, Bundle
from modelevents.schemas.errors import InputError, SchemaError
from modelevents.services.kafka.clients import read_records, run_key_bytes, start_producer
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["TOPIC", "put", "read_all", "find", "get"]

log = logging.getLogger("modelevents.migration.bundles")

TOPIC = "bundles"


async def put(settings: PipelineSettings, bundle: Bundle) -> StoredBundle:
    """Write ``bundle`` on the topic and wait for the acknowledgement."""
    stored = StoredBundle(bundle, int(time.time() * 1000))
    producer = await start_producer(settings, linger_ms=0)
    try:
        await producer.send_and_wait(settings.topic(TOPIC), key=run_key_bytes(bundle.bundle_id),
                                     value=bundle_record.encode(bundle, stored.created_at))
    finally:
        await producer.stop()
    return stored


async def read_all(settings: PipelineSettings, timeout: float = 10.0) -> dict[str, StoredBundle]:
    """Every bundle the topic holds now, by id, first written first (a bundle written again
    keeps its first ``created_at``)."""
    found: dict[str, StoredBundle] = {}
    async for record in read_records(settings, TOPIC, to_end=True, timeout=timeout):
        if record is None or record.raw is None:
            continue
        try:
            stored = bundle_record.decode(record.raw)
        except SchemaError as exc:
            log.warning("skipped %s partition %d offset %d: %s", record.topic,
                        record.partition, record.offset, exc)
            continue
        if record.key != run_key_bytes(stored.bundle_id):
            log.warning("skipped %s partition %d offset %d: keyed %r, not its id %s",
                        record.topic, record.partition, record.offset, record.key_text,
                        stored.bundle_id)
            continue
        found.setdefault(stored.bundle_id, stored)
    return dict(sorted(found.items(), key=lambda item: item[1].created_at))


def find(bundles: dict[str, StoredBundle], ref: str) -> StoredBundle:
    """The bundle whose id is ``ref`` or starts with it (``bnd-`` may be left out); InputError
    when none does or several do."""
    ref = ref.strip()
    if not bundle_record.looks_like_id(ref):
        raise InputError(f"{ref!r} is not a bundle id: ids are {BUNDLE_ID_PREFIX} and 64 hex "
                         f"digits (a prefix of one will do); see `modelevents bundle list`")
    prefix = ref if ref.startswith(BUNDLE_ID_PREFIX) else BUNDLE_ID_PREFIX + ref
    matches = [stored for bundle_id, stored in bundles.items() if bundle_id.startswith(prefix)]
    if not matches:
        raise InputError(f"no bundle {ref!r} on the bundles topic ({len(bundles)} bundles "
                         "there); see `modelevents bundle list`")
    if len(matches) > 1:
        listed = ", ".join(f"{m.bundle_id[:16]}… ({m.bundle.name})" for m in matches[:5])
        raise InputError(f"bundle prefix {ref!r} is ambiguous: {len(matches)} bundles start "
                         f"with it ({listed}); give more of the id")
    return matches[0]


async def get(settings: PipelineSettings, ref: str) -> StoredBundle:
    """The bundle ``ref`` names on the topic (:func:`find`)."""
    return find(await read_all(settings), ref)
