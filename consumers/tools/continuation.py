"""The loop continues: once every tool call of a provider call has its result, the run's next
call goes through the gateway — ``POST /v1/runs`` with the run id and the run's neutral history
(``GET /v1/runs/{id}/messages``, which holds the tool results from ``events``) — for tenants whose
policy says ``auto_continue``, on their ``continue_target`` (any provider). Other tenants'
applications continue their runs themselves. A run started under a bundle continues under it:
the bundle id is read from the run's latest input packet (``input.bundle`` of the messages just
fetched — the very call being continued, so no state of the executor's own), and the call names
only the bundle, whose target, instructions, tools and sampling the gateway fills in; the
policy's ``continue_target`` and the registry's tools are for runs under none.

Stateless on purpose: whether a run is ready is read from its state on the gateway (status
``waiting_for_tool``, no open tool call) after the state caught up with the result just seen, so
a restarted executor decides the same; the POST carries an ``Idempotency-Key`` derived from the
run and that result's ``seq``, so deciding twice sends one call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.registry import ToolRegistry
from modelevents.schemas.events import ModelEvent
from modelevents.services.run_logic.executor_events import outcome_unknown

__all__ = ["Continuation"]

log = logging.getLogger(__name__)

STATE_WAIT_S = 10.0


class Continuation:
    def __init__(self, gateway_url: str, policy: Policy, registry: ToolRegistry) -> None:
        self.gateway_url = gateway_url.rstrip("/")
        self.policy = policy
        self.registry = registry
        self.http = httpx.AsyncClient(base_url=self.gateway_url, timeout=30.0)
        self.posted: list[str] = []  # run ids continued (for the CLI's log and the tests)

    async def close(self) -> None:
        await self.http.aclose()

    async def after_result(self, result: ModelEvent) -> None:
        rules = self.policy.tenant(result.tenant)
        if rules is None or not rules.auto_continue or not rules.continue_target:
            return
        if outcome_unknown(result):
            log.warning("run %s not continued: a tool call's outcome is unknown (seq %s); the "
                        "application reconciles it", result.run_id, result.seq)
            return
        headers = ({"Authorization": f"Bearer {rules.gateway_token}"}
                   if rules.gateway_token else {})
        state = await self._caught_up_state(result, headers)
        if state is None or state["status"] != "waiting_for_tool" or state["open_tool_calls"]:
            return  # other results are still to come (the last one continues), or it moved on
        messages = await self.http.get(f"/v1/runs/{result.run_id}/messages", headers=headers)
        messages.raise_for_status()
        history = messages.json()
        # The continuation acts for the run's tenant (a gateway without api_tokens would take
        # the request for its default tenant's, and refuse a run id another tenant owns).
        body: dict[str, Any] = {
            "run_id": result.run_id, "tenant": result.tenant,
            "transcript": history["messages"]}
        bundle = (history.get("input") or {}).get("bundle")
        if bundle is not None:
            # Under its bundle still: the gateway fills the target, instructions, tools and
            # sampling from it (and would refuse others), so the run never leaves it.
            body["bundle"] = bundle
            where = f"bundle {bundle}"
        else:
            body["target"] = rules.continue_target
            body["tools"] = [contract.declaration() for contract in self.registry]
            where = str(rules.continue_target)
        answer = await self.http.post(
            "/v1/runs", json=body,
            headers={**headers, "Idempotency-Key": f"continue-{result.run_id}-{result.seq}"})
        if answer.status_code == 202:
            self.posted.append(result.run_id)
            log.info("run %s continued on %s", result.run_id, where)
        else:
            log.warning("run %s not continued on %s: %s %s", result.run_id, where,
                        answer.status_code, answer.text[:500])

    async def _caught_up_state(self, result: ModelEvent, headers: dict[str, str]
                               ) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STATE_WAIT_S
        while True:
            response = await self.http.get(f"/v1/runs/{result.run_id}", headers=headers)
            if response.status_code == 200:
                state = response.json().get("state")
                if state is not None and state.get("last_seq", -1) >= result.seq:
                    return dict(state)
            if loop.time() > deadline:
                log.warning("run %s: the gateway's state did not reach seq %s", result.run_id,
                            result.seq)
                return None
            await asyncio.sleep(0.1)
