"""What every proxied request shares while the gateway runs: the upstreams, the frame tee, the
runs of provider objects this process saw created, and the run openings still being written.

One :class:`ProxyHub` lives in ``app.state.proxy`` (``app.py`` builds it in its lifespan);
routes are given it with ``Depends(running_proxy)``. :meth:`ProxyHub.upstream` resolves a name
of the URL (``/proxy/{upstream}/…``) under ``proxy.upstreams`` and the gateway's providers
(``services/gateway/upstreams.py``). :meth:`ProxyHub.open_run` writes, in the background, the
claim of a client's run id and the call's input packet (redacted as the gateway redacts: ``inputs/``),
so the client never waits for Kafka; a claim that finds the id another tenant's is logged.
``ProxyHub.limiter`` holds each tenant's limits (``limits.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from modelevents.adapters.registry import ADAPTERS
from modelevents.services.gateway.proxy.limits import TenantLimiter
from modelevents.services.gateway.spool.tee import FrameTee
from modelevents.services.gateway.state import Gateway
from modelevents.services.gateway.upstreams import BUILT_IN_UPSTREAMS, Upstream

__all__ = ["ProxyHub", "RunningProxy", "Target", "running_proxy"]

log = logging.getLogger("modelevents.gateway.proxy")

# Provider objects (responses, interactions) remembered with their run, newest kept.
OBJECT_RUNS = 100_000


@dataclass(frozen=True)
class Target:
    """An upstream resolved for one request."""

    name: str
    base_url: str
    built_in: bool
    provider_name: str | None  # the upstream's configured provider name
    keys: dict[str, str] = field(repr=False)  # tenant → key ("" : every tenant's default)

    def provider(self, api: str) -> str:
        """The provider the run's events name."""
        if self.provider_name is not None:
            return self.provider_name
        return ADAPTERS[api].default_provider if self.built_in else self.name

    def key_for(self, tenant: str) -> str | None:
        return self.keys.get(tenant) or self.keys.get("") or None


class ProxyHub:
    def __init__(self, gateway: Gateway, tee: FrameTee,
                 limiter: TenantLimiter | None = None) -> None:
        self.gateway = gateway
        self.tee = tee
        # The app's is given (its token sums are fed by the view of runs); else no usage known.
        self.limiter = limiter or TenantLimiter(gateway.config.proxy)
        self.in_flight = 0
        self._objects: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._openings: set[asyncio.Task[None]] = set()

    def upstream(self, name: str) -> Target | None:
        config = self.gateway.config
        entry = config.proxy.upstreams.get(name)
        provider = config.providers.get(name) if name in BUILT_IN_UPSTREAMS else None
        if entry is None and provider is None:
            return None
        entry = entry or Upstream()
        keys: dict[str, str] = {t: k.get_secret_value() for t, k in entry.tenant_keys.items()}
        default = entry.api_key or (provider.api_key if provider is not None else None)
        if default is not None:
            keys[""] = default.get_secret_value()
        base_url = entry.base_url or (provider.base_url if provider is not None else None)
        if base_url is None:
            return None
        return Target(name, base_url, name in BUILT_IN_UPSTREAMS, entry.provider, keys)

    def upstream_names(self) -> list[str]:
        config = self.gateway.config
        return sorted(set(config.proxy.upstreams)
                      | {n for n in BUILT_IN_UPSTREAMS if n in config.providers})

    # --- provider objects and their runs ---------------------------------------------------

    def learned(self, object_id: str, run_id: str, tenant: str) -> None:
        self._objects[object_id] = (run_id, tenant)
        self._objects.move_to_end(object_id)
        while len(self._objects) > OBJECT_RUNS:
            self._objects.popitem(last=False)

    def run_of_object(self, object_id: str) -> tuple[str, str] | None:
        """(run id, tenant) of a provider object a proxied call created, as far as this
        process knows (else the runs topic's states name it: ``Gateway.run_of_object``)."""
        return self._objects.get(object_id)

    # --- opening runs in the background ------------------------------------------------------

    def open_run(self, run_id: str, tenant: str, *, fresh: bool,
                 packet: Callable[[], Any]) -> None:
        """Claim ``run_id`` for ``tenant`` (unless ``fresh``: made up by the gateway) and
        write the call's input packet, in the background; ``packet`` builds the RunInput (or None for none) there too: redacting a
        long request costs time the client need not wait for."""
        task = asyncio.get_running_loop().create_task(
            self._open(run_id, tenant, fresh, packet), name=f"open proxied run {run_id}")
        self._openings.add(task)
        task.add_done_callback(self._openings.discard)

    async def _open(self, run_id: str, tenant: str, fresh: bool,
                    packet: Callable[[], Any]) -> None:
        gateway = self.gateway
        try:
            # An id made up here is nobody else's: the worker's state of the run names its
            # tenant (``Gateway.owner_of`` reads it), so only a client's id is claimed.
            if not fresh and not await gateway.claim_run(run_id, tenant):
                log.error("proxy: run id %s is another tenant's; the frames of tenant %s's call "
                          "were written under it", run_id, tenant)
                return
            built = packet()
            if built is not None:
                await gateway.publish_input(built)
        except Exception as exc:  # Kafka away: the frames tee keeps the call's output
            log.warning("proxy: run %s: its claim or input packet was not written: %s", run_id,
                        exc)

    async def close(self) -> None:
        for task in list(self._openings):
            task.cancel()
        await asyncio.gather(*self._openings, return_exceptions=True)


async def running_proxy(request: Request) -> ProxyHub:
    """The proxy this request is served by (set by the app's lifespan before any request);
    async, so that FastAPI does not hand each call to its thread pool to ask."""
    return request.app.state.proxy


RunningProxy = Annotated[ProxyHub, Depends(running_proxy)]
