"""What the calls modules need of the running gateway: :class:`CallsHost`.

``handover.py`` and ``idempotency.py`` act on the gateway's shared parts (its calls records, its
calls in flight, its producer). They name those parts here instead of importing the gateway's
:class:`~modelevents.services.gateway.state.Gateway` (which is one such host), so that the calls
package sits below the state that composes it and nothing in the gateway imports in a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from modelevents.schemas.frames import ProviderFrame
    from modelevents.services.gateway.calls.in_flight import LocalRuns
    from modelevents.services.gateway.calls.records import CallsView
    from modelevents.services.gateway.config import GatewayConfig
    from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["CallsHost"]


class CallsHost(Protocol):
    config: GatewayConfig
    calls: CallsView  # the calls records every replica shares
    runs: LocalRuns  # this process's calls
    http: httpx.AsyncClient  # to the providers
    incarnation: str  # this process among those of its instance id

    @property
    def instance(self) -> str: ...

    @property
    def settings(self) -> PipelineSettings: ...

    async def publish_call(self, key: bytes, value: bytes) -> Any: ...

    async def publish_all(self, frames: list[ProviderFrame]) -> list[Any]: ...
