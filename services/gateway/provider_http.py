"""How the gateway talks HTTP to the providers: endpoints, credentials, retries.

One table per concern, read against the references in one glance:

- :data:`FOLLOW_UPS` — per provider API, the path to read an object back, to cancel it, and the
  query parameter that resumes a cut stream (openai.md §9: ``GET
  /v1/responses/{id}?stream=true&starting_after=N``, background responses only; gemini.md A2:
  ``GET /v1beta/interactions/{id}?stream=true&last_event_id=…``). Chat Completions, Claude
  Messages and generateContent streams cannot be resumed. The create call's path comes with the
  rendered request (``adapters/requests``).
- :data:`AUTH_HEADERS` — how each provider takes its API key (openai.md §8, anthropic.md,
  gemini.md). Keys are :class:`pydantic.SecretStr` in the config; a call holds its key in memory
  only (not in its repr) until the header is built; nothing here logs a header.
- :func:`send` — one request with the retry policy of the official SDKs (openai.md §8.3:
  network errors, 408, 409, 429 and 5xx are retried with exponential backoff and jitter,
  honouring ``retry-after``/``retry-after-ms``), built on tenacity.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from modelevents.services.errors import ProviderHTTPError

__all__ = ["AUTH_HEADERS", "FOLLOW_UPS", "FollowUp", "ProviderHTTPError", "retryable",
           "auth_headers", "json_request", "retry_after_seconds", "send"]

log = logging.getLogger("modelevents.gateway.provider_http")

# Besides every 5xx (Anthropic's 529 overloaded_error among them), as the official SDKs retry.
_RETRY_STATUS = frozenset({408, 409, 429})


def retryable(status: int) -> bool:
    """A status worth another attempt (openai.md §8.3: 408, 409, 429 and >= 500)."""
    return status in _RETRY_STATUS or status >= 500

MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class FollowUp:
    """What an API offers after the create call (the create call itself is rendered by
    ``adapters/requests``): read the object back, cancel it, resume its stream."""

    get: str | None = None  # path of the object ({id})
    cancel: str | None = None  # path that cancels it ({id})
    resume_param: str | None = None  # GET {get}?stream=true&<param>=<cursor>
    resume_background_only: bool = False  # only a background call's stream can be resumed


FOLLOW_UPS: dict[str, FollowUp] = {
    # openai.md §9: only background responses can be cancelled or streamed again.
    "openai-responses": FollowUp(get="/v1/responses/{id}", cancel="/v1/responses/{id}/cancel",
                                 resume_param="starting_after", resume_background_only=True),
    "openai-chat": FollowUp(),
    "anthropic-messages": FollowUp(),
    "gemini-interactions": FollowUp(get="/v1beta/interactions/{id}",
                                    cancel="/v1beta/interactions/{id}/cancel",
                                    resume_param="last_event_id"),
    "gemini-generate": FollowUp(),
}

ANTHROPIC_VERSION = "2023-06-01"

AUTH_HEADERS: dict[str, Callable[[str], dict[str, str]]] = {
    "openai": lambda key: {"authorization": f"Bearer {key}"},
    "anthropic": lambda key: {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION},
    "google": lambda key: {"x-goog-api-key": key},
}
AUTH_HEADERS["gemini"] = AUTH_HEADERS["google"]  # the config's name and the events' name


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The delay a provider asks for: ``retry-after-ms``, ``retry-after`` in seconds or as an
    HTTP date (openai.md §8.3 reads them in this order)."""
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        raw = headers.get("retry-after")
        if raw is None:
            return None
        try:
            return max(0.0, float(raw))
        except ValueError:
            moment = parsedate_to_datetime(raw)
            return max(0.0, moment.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class _Retryable(Exception):
    def __init__(self, response: httpx.Response | None, cause: BaseException | None) -> None:
        super().__init__(repr(cause) if cause else f"HTTP {response.status_code if response else '?'}")
        self.response, self.cause = response, cause


def _wait(state: RetryCallState, base: float) -> float:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    if isinstance(error, _Retryable) and error.response is not None:
        asked = retry_after_seconds(error.response)
        if asked is not None and asked <= 60:
            return asked
    backoff = min(MAX_BACKOFF_S, base * 2 ** (state.attempt_number - 1))
    return backoff * (0.75 + random.random() / 4)


async def send(client: httpx.AsyncClient, request: httpx.Request, *, provider: str,
               attempts: int = 4, backoff: float = 0.5, stream: bool = False,
               on_retry: Callable[[str], None] | None = None) -> httpx.Response:
    """Send ``request``; retry network errors and retryable statuses up to ``attempts`` times.

    Returns the first response that is not retryable (a 2xx, or a 4xx that retrying cannot fix —
    the caller decides what an error body means). ``stream``: the body is not read (the caller
    iterates it and must close the response). Raises :class:`ProviderHTTPError` when the last
    attempt still got a retryable status, httpx's TransportError when it still failed to connect.
    """

    async def once() -> httpx.Response:
        try:
            response = await client.send(request, stream=stream)
        except httpx.TransportError as exc:
            raise _Retryable(None, exc) from exc
        if retryable(response.status_code):
            await response.aread()
            await response.aclose()
            raise _Retryable(response, None)
        return response

    def report(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        message = (f"{provider} {request.method} {request.url.path}: {error}; attempt "
                   f"{state.attempt_number} of {attempts}, retrying")
        log.warning("%s", message)
        if on_retry is not None:
            on_retry(message)

    retrying = AsyncRetrying(stop=stop_after_attempt(attempts),
                             wait=lambda state: _wait(state, backoff),
                             retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
                             before_sleep=report, reraise=True)
    try:
        return await retrying(once)
    except _Retryable as exc:
        if exc.response is not None:
            raise ProviderHTTPError(provider, exc.response.status_code, exc.response.content,
                                    str(request.url)) from None
        raise exc.cause from None  # type: ignore[misc]


def auth_headers(provider: str, api_key: str | None) -> dict[str, str]:
    return AUTH_HEADERS[provider](api_key) if api_key else {}


def json_request(client: httpx.AsyncClient, method: str, url: str, *, provider: str,
                 api_key: str | None, body: Any = None, params: Any = None,
                 stream: bool = False, headers: dict[str, str] | None = None) -> httpx.Request:
    headers = {"accept": "text/event-stream" if stream else "application/json",
               **(headers or {}), **auth_headers(provider, api_key)}
    return client.build_request(method, url, json=body, params=params, headers=headers)
