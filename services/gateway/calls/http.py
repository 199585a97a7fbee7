"""How the gateway talks HTTP to the providers: endpoints, credentials, retries.

What the gateway must know of each provider API — the paths to read an object back, to cancel
it and to resume its stream, and how the API takes its key — is the API's
:class:`~modelevents.adapters.api_facts.ApiFacts`, declared beside its adapter and read through
``adapters.registry.api_facts``. Here:

- :func:`auth_headers` — the headers that carry a call's key (the API's ``auth_headers``). Keys
  are :class:`pydantic.SecretStr` in the config; a call holds its key in memory only (not in its
  repr) until the header is built; nothing here logs a header.
- :func:`send` — one request with the retry policy of the official SDKs (OpenAI Python library,
  "Retries": network errors, 408, 409, 429 and 5xx are retried with exponential backoff and jitter,
  honouring ``retry-after``/``retry-after-ms``), built on tenacity.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from modelevents.adapters.registry import api_facts
from modelevents.services.errors import ProviderHTTPError

__all__ = ["ProviderHTTPError", "retryable", "auth_headers", "json_request",
           "retry_after_seconds", "send"]

log = logging.getLogger("modelevents.gateway.provider_http")

# Besides every 5xx (Anthropic's 529 overloaded_error among them), as the official SDKs retry.
_RETRY_STATUS = frozenset({408, 409, 429})


def retryable(status: int) -> bool:
    """A status worth another attempt (OpenAI Python library, "Retries": 408, 409, 429 and >= 500)."""
    return status in _RETRY_STATUS or status >= 500

MAX_BACKOFF_S = 30.0


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The delay a provider asks for: ``retry-after-ms``, ``retry-after`` in seconds or as an
    HTTP date (the OpenAI Python library reads them in this order)."""
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


def auth_headers(api: str, api_key: str | None) -> dict[str, str]:
    """The headers that carry ``api_key`` to provider API ``api`` (none without a key)."""
    return api_facts(api).auth_headers(api_key) if api_key else {}


def json_request(client: httpx.AsyncClient, method: str, url: str, *, api: str,
                 api_key: str | None, body: Any = None, params: Any = None,
                 stream: bool = False, headers: dict[str, str] | None = None) -> httpx.Request:
    headers = {"accept": "text/event-stream" if stream else "application/json",
               **(headers or {}), **auth_headers(api, api_key)}
    return client.build_request(method, url, json=body, params=params, headers=headers)
