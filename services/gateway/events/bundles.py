"""The bundles the gateway runs requests under: a view of ``<prefix>bundles``.

Read from its start and followed like the other views (``topic_view.py``), but started by the
first request that names a bundle, not with the gateway: a gateway whose users run no bundles
neither reads the topic nor needs it to exist. A bundle not in the view is looked for until the
view has read the topic to its end and for :data:`LATE_S` more (a bundle created a moment before
the request that names it); only then is it unknown.

More on this module: docs/migration.md "Bundles", ``schemas/bundle_record.py``.
"""

from __future__ import annotations

import logging
from typing import Any

from modelevents.schemas import bundle_record
from modelevents.schemas.bundle_record import StoredBundle
from modelevents.schemas.errors import SchemaError
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["BundleView", "LATE_S"]

log = logging.getLogger(__name__)

# How long a bundle the caught-up view lacks is waited for: a few of the view's fetches.
LATE_S = 2.0


class BundleView(TopicView):
    """Every bundle on the topic, by id (records that are not bundles are skipped)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, "bundles")
        self.bundles: dict[str, StoredBundle] = {}
        self._started = False

    def apply(self, message: Any) -> bool:
        try:
            stored = bundle_record.decode(message.value or b"")
        except SchemaError as exc:
            log.warning("skipped %s partition %d offset %d: %s", self.topic, message.partition,
                        message.offset, exc)
            return False
        if message.key != stored.bundle_id.encode() or stored.bundle_id in self.bundles:
            return False
        self.bundles[stored.bundle_id] = stored
        return True

    async def find(self, bundle_id: str, timeout: float) -> StoredBundle | None:
        """The bundle, once the view has read far enough to know it; None: not on the topic.
        KafkaUnavailable when the topic could not be read to its end within ``timeout``
        seconds (a broker away, or no bundles topic: ``modelevents topics create``)."""
        found = self.bundles.get(bundle_id)
        if found is not None:
            return found
        if not self._started:
            self._started = True
            await self.start()
        if not await self.wait_until(self.caught_up.is_set, timeout):
            raise KafkaUnavailable(self.settings.bootstrap_servers,
                                   f"{self.topic} not read to its end within {timeout:g} s "
                                   "(does the topic exist? `modelevents topics create`)")
        await self.wait_until(lambda: bundle_id in self.bundles, LATE_S)
        return self.bundles.get(bundle_id)
