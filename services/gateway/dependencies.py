"""What a route asks of the running gateway, as FastAPI dependencies.

The app's lifespan keeps one :class:`~modelevents.services.gateway.state.Gateway` in
``app.state.gateway`` (``app.py``). A route names what it needs in its parameters::

    async def get_run(run_id: str, request: Request, gateway: RunningGateway) -> ...

and FastAPI hands it over per request. Helpers that are given only the request (the caller's
tenant: ``auth.py``) read it with :func:`running_gateway` too.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from modelevents.services.gateway.state import Gateway

__all__ = ["RunningGateway", "running_gateway"]


def running_gateway(request: Request) -> Gateway:
    """The gateway this request is served by (set by the app's lifespan before any request)."""
    return request.app.state.gateway


async def _given_gateway(request: Request) -> Gateway:
    # async: FastAPI runs a plain-def dependency in its thread pool, a hop for every request.
    return running_gateway(request)


RunningGateway = Annotated[Gateway, Depends(_given_gateway)]
