"""Which headers cross the proxy, each way, and the proxy's own.

Request (client → upstream): every header but the hop-by-hop ones (RFC 9110 §7.6.1, and those
the client's ``Connection`` names), ``host`` and ``content-length`` (the upstream's connection
sets them) and the proxy's own ``x-modelevents-*``; ``accept-encoding`` is narrowed to what the
tee decodes (gzip, deflate). The client's provider key passes through; when it sends none, the
gateway's key for the tenant is added as the API takes it.

Response (upstream → client): every header but the hop-by-hop ones and ``date`` and ``server``,
so rate-limit headers, ``retry-after``, request ids, ``content-type`` and ``content-encoding``
arrive as the provider sent them; the proxy adds ``x-modelevents-run-id``. The gateway's HTTP
server sends its own ``date`` and ``server`` on every answer: relayed too, a client would get
each twice, joined into one unparseable value (nginx drops the upstream's two for that reason).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["KEY_HEADERS", "RUN_ID", "TENANT", "TOKEN", "has_key", "request_headers",
           "response_headers"]

# The proxy's own headers (never sent upstream).
TOKEN = "x-modelevents-token"  # the gateway's bearer token (api_tokens), when it requires one
TENANT = "x-modelevents-tenant"  # the tenant the call is for (must match the token's)
RUN_ID = "x-modelevents-run-id"  # the run the call belongs to; answered with the run's id
BUNDLE = "x-modelevents-bundle"  # the bundle a create call runs under (docs/migration.md)
OWN_PREFIX = "x-modelevents-"

# Headers that carry a provider key (OpenAI and compatible servers, Claude, Gemini, Azure).
KEY_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "proxy-authenticate",
                        "proxy-authorization"})
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length"}
# What the gateway's HTTP server (uvicorn) adds to every answer itself.
_SERVERS_OWN = frozenset({"date", "server"})
# What the tee can decode of a compressed body (zlib: gzip and deflate).
DECODABLE = ("gzip", "deflate", "identity")


def _named_by_connection(headers: Iterable[tuple[str, str]]) -> set[str]:
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named.update(token.strip().lower() for token in value.split(",") if token.strip())
    return named


def _accept_encoding(value: str) -> str | None:
    kept = [part.strip() for part in value.split(",")
            if part.split(";")[0].strip().lower() in DECODABLE]
    return ", ".join(kept) if kept else None


def request_headers(headers: Iterable[tuple[str, str]], key_headers: dict[str, str]
                    ) -> list[tuple[str, str]]:
    """The headers sent upstream: the client's (see the module docstring), plus
    ``key_headers`` (the gateway's key) when the client sent no key of its own."""
    headers = list(headers)
    dropped = _NOT_FORWARDED | _named_by_connection(headers)
    out: list[tuple[str, str]] = []
    for name, value in headers:
        lower = name.lower()
        if lower in dropped or lower.startswith(OWN_PREFIX):
            continue
        if lower == "accept-encoding":
            narrowed = _accept_encoding(value)
            if narrowed is None:
                continue
            value = narrowed
        out.append((name, value))
    if not has_key(headers):
        present = {name.lower() for name, _ in out}
        out.extend((name, value) for name, value in key_headers.items()
                   if name.lower() not in present)  # the client's anthropic-version stays
    if not any(name.lower() == "accept-encoding" for name, _ in out):
        # httpx would ask for br/zstd too, which the tee could not read.
        out.append(("accept-encoding", "gzip, deflate"))
    return out


def has_key(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether the client sent a provider key of its own."""
    return any(name.lower() in KEY_HEADERS and value.strip() for name, value in headers)


def response_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers the client gets (raw, as ASGI sends them)."""
    headers = list(headers)
    named = _named_by_connection((n.decode("latin-1"), v.decode("latin-1")) for n, v in headers)
    dropped = HOP_BY_HOP | _SERVERS_OWN | named
    return [(name, value) for name, value in headers if name.lower().decode("latin-1")
            not in dropped]
