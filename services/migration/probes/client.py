"""A probe request through the gateway, read back from the run's events.

``GatewayClient.send(request)`` POSTs the neutral request to ``/v1/runs``, waits until the run's
state is terminal or waits for a tool or an approval (its provider call over), then reads every
event of the run from ``GET /v1/runs/{id}/events?follow=false``: what the worker wrote to
``events``, no side channel.
A gateway that cannot be reached raises ProbeError (the command exits 2); everything the gateway
answers is an ``Outcome`` for ``observe.judge``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson

from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.run_state import TERMINAL_RUN_STATES
from modelevents.services.errors import ProbeError
from modelevents.services.migration.probes.observe import Outcome

__all__ = ["GatewayClient"]

# A run waiting for its tool results or an approval has shown all it will without them.
_SETTLED = {*TERMINAL_RUN_STATES, "waiting_for_tool", "waiting_for_approval"}


class GatewayClient:
    def __init__(self, url: str, *, timeout_s: float = 60.0, poll_s: float = 0.1) -> None:
        self.url = url.rstrip("/")
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self._http = httpx.Client(timeout=30.0)

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, f"{self.url}{path}", **kwargs)
        except httpx.TransportError as exc:
            raise ProbeError(f"the gateway at {self.url} cannot be reached ({exc}); start it "
                             "(`modelevents gateway`) or pass its address with --gateway") from None

    def check(self) -> None:
        """ProbeError unless the gateway answers ready (before any request is counted)."""
        response = self._request("GET", "/readyz")
        if response.status_code != 200:
            raise ProbeError(f"the gateway at {self.url} is not ready (GET /readyz answered "
                             f"{response.status_code}: {response.text[:200]})")

    def send(self, request: dict[str, Any]) -> Outcome:
        response = self._request("POST", "/v1/runs", json=request)
        if response.status_code != 202:
            try:
                problem = response.json()
                detail = f"{problem.get('code') or problem.get('title')}: {problem.get('detail')}"
            except (ValueError, AttributeError):
                detail = response.text
            return Outcome(request.get("run_id"), refused_status=response.status_code,
                           refused_detail=detail[:2000])
        run_id = str(response.json()["run_id"])
        unsettled = self._wait(run_id)
        return Outcome(run_id, self._events(run_id), unsettled=unsettled)

    def _wait(self, run_id: str) -> str | None:
        """None once the run settled; else why not."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            response = self._request("GET", f"/v1/runs/{run_id}")
            if response.status_code == 200:
                body = response.json()
                state, calls = body.get("state"), body.get("calls") or []
                if state is not None and state.get("status") in _SETTLED \
                        and not (calls and calls[-1].get("in_flight")):
                    return None
            if time.monotonic() > deadline:
                return f"the run did not settle within {self.timeout_s:g} s"
            time.sleep(self.poll_s)

    def _events(self, run_id: str) -> list[dict[str, Any]]:
        decoder = SSEDecoder(strict=True)
        events: list[dict[str, Any]] = []
        try:
            with self._http.stream("GET", f"{self.url}/v1/runs/{run_id}/events",
                                   params={"follow": "false"},
                                   timeout=self.timeout_s) as response:
                if response.status_code != 200:
                    raise ProbeError(f"run {run_id}: GET /v1/runs/{run_id}/events answered "
                                     f"{response.status_code}: {response.read()[:200]!r}")
                for chunk in response.iter_raw():
                    events.extend(orjson.loads(m.data) for m in decoder.feed(chunk))
        except httpx.TransportError as exc:
            raise ProbeError(f"the gateway at {self.url} stopped answering while run {run_id}'s "
                             f"events were read ({exc})") from None
        return events
