"""The fetch of an object a webhook names but does not carry.

OpenAI's ``response.*`` webhooks carry only ``data.id`` (OpenAI Webhooks guide: the payload is
thin, the object is read with GET /v1/responses/{data.id}); Gemini's ``interaction.*`` webhooks name an interaction
(Gemini Webhooks guide). After the webhook's frame is acknowledged (and the provider answered 2xx),
the gateway fetches the authoritative object and publishes it as a ``poll`` frame keyed like the
webhook, so the processor joins it to the run that claimed the object id.

The fetch never holds up the acknowledgement: it runs as a background task, retried with
exponential backoff on network errors, 408/409/429 and 5xx (the OpenAI SDK's retry set:
OpenAI Python library, "Retries") and on an unavailable Kafka; a 4xx that retrying cannot fix is logged and
dropped. The poll frame's frame_id is ``poll:<object id>:<webhook-id>``, so a redelivered
webhook that fetches again writes the same frame and the processor drops the copy.

API keys go into the request header only; they are never logged and never put in a frame
(only the ``x-request-id`` response header is kept).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import httpx

from modelevents.adapters.registry import api_facts
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.calls.http import retryable
from modelevents.services.gateway.config import PROVIDERS, GatewayConfig

__all__ = ["FetchJob", "Fetcher", "fetch_target"]

log = logging.getLogger("modelevents.gateway.fetch")

_MAX_BACKOFF_S = 60.0
_KEPT_RESPONSE_HEADERS = ("x-request-id",)


@dataclass(frozen=True)
class FetchJob:
    provider: str  # openai | gemini
    tenant: str
    api: str
    object_id: str
    webhook_id: str
    run_key: str


def fetch_target(api: str, event_type: str, object_id: str | None) -> bool:
    """Does this webhook about ``api``'s objects name one whose content the gateway should
    fetch? (The API's ``Webhooks.fetch_prefix``: OpenAI ``response.*``, Gemini
    ``interaction.*``.)"""
    facts = api_facts(api)
    return (bool(object_id) and facts.webhooks is not None and facts.follow_up.get is not None
            and event_type.startswith(facts.webhooks.fetch_prefix))


class Fetcher:
    """Runs fetch jobs in the background; ``publish`` writes a frame and waits for its ack."""

    def __init__(self, config: GatewayConfig, publish) -> None:
        self.config = config
        self._publish = publish
        self._client = httpx.AsyncClient(timeout=config.fetch_timeout_s)
        self._tasks: set[asyncio.Task] = set()

    def schedule(self, job: FetchJob) -> None:
        name = f"fetch of {job.provider} {job.object_id} (webhook {job.webhook_id})"
        task = asyncio.create_task(self._run(job), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            log.warning("gateway stopping: %s abandoned; its webhook frame is on Kafka, the "
                        "object was not fetched", task.get_name())
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()

    def _request(self, job: FetchJob) -> tuple[str, dict[str, str]] | None:
        provider = self.config.provider(job.provider)
        if provider is None or provider.api_key is None:
            return None
        facts = api_facts(job.api)
        assert facts.follow_up.get is not None  # fetch_target: an API that reads objects back
        path = facts.follow_up.get.format(id=job.object_id)
        return (f"{provider.base_url}{path}",
                facts.auth_headers(provider.api_key.get_secret_value()))

    async def _run(self, job: FetchJob) -> None:
        request = self._request(job)
        if request is None:
            env = PROVIDERS[job.provider]["api_key"][0]
            log.warning("webhook %s names %s %s, but no %s API key is configured (set %s or "
                        "providers.%s.api_key): not fetched", job.webhook_id, job.provider,
                        job.object_id, job.provider, env, job.provider)
            return
        url, headers = request
        delay = self.config.fetch_backoff_s
        for attempt in range(1, self.config.fetch_attempts + 1):
            try:
                if await self._attempt(job, url, headers):
                    return
            except asyncio.CancelledError:
                raise
            except (httpx.HTTPError, ModelEventsError) as exc:
                # The message of an httpx error names the URL, never the headers.
                log.warning("fetch of %s %s (webhook %s) attempt %d/%d failed: %s",
                            job.provider, job.object_id, job.webhook_id, attempt,
                            self.config.fetch_attempts, exc)
            except _Permanent as exc:
                log.error("fetch of %s %s (webhook %s) refused: %s; not retried", job.provider,
                          job.object_id, job.webhook_id, exc)
                return
            if attempt < self.config.fetch_attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_BACKOFF_S)
        log.error("fetch of %s %s (webhook %s) gave up after %d attempts", job.provider,
                  job.object_id, job.webhook_id, self.config.fetch_attempts)

    async def _attempt(self, job: FetchJob, url: str, headers: dict[str, str]) -> bool:
        response = await self._client.get(url, headers=headers)
        status = response.status_code
        if retryable(status):
            raise httpx.HTTPStatusError(f"HTTP {status} from {url}", request=response.request,
                                        response=response)
        if status >= 400:
            raise _Permanent(f"HTTP {status} from {url}: {response.text[:200]}")
        kept = {h: response.headers[h] for h in _KEPT_RESPONSE_HEADERS if h in response.headers}
        frame = ProviderFrame(
            frame_id=f"poll:{job.object_id}:{job.webhook_id}", run_key=job.run_key,
            provider=api_facts(job.api).provider, api=job.api, transport="poll",
            received_at=int(time.time() * 1000),
            content_type=response.headers.get("content-type", "application/json"),
            body=response.content, tenant=job.tenant, headers=kept, http_status=status)
        await self._publish(frame)
        log.info("fetched %s %s for webhook %s: poll frame %s published", job.provider,
                 job.object_id, job.webhook_id, frame.frame_id)
        return True


class _Permanent(Exception):
    """A provider answer that retrying cannot change (404, 401 ...)."""
