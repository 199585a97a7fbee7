"""FrameTee: how the drop-in proxy hands the frames it passed to the client over to Kafka.

The proxy never waits for Kafka: it offers each piece of a stream's frames as it goes by, and
asks before calling a provider whether the tenant may be served now. The gateway's tee is
``journal.py`` beside it (``Gateway.tee``).
"""

from __future__ import annotations

from typing import Protocol

from modelevents.schemas.frames import ProviderFrame

__all__ = ["FrameTee"]


class FrameTee(Protocol):
    def offer(self, frames: list[ProviderFrame], tenant: str) -> None:
        """Hands the frames over; returns at once, never raises."""

    def accepting(self, tenant: str) -> bool:
        """False: Kafka is unreachable and the tenant fails closed (or the journal is full
        under `on_full: fail_closed`): the proxy answers 503 before calling the provider."""

