"""How the gateway's connections are served: uvloop, httptools, and a deadline on request headers.

uvicorn serves the gateway on uvloop's event loop with httptools' HTTP/1.1 parser (C, both):
with the pure-Python h11 on asyncio's loop a chunk the drop-in proxy relays cost 1.7 times the
CPU (docs/performance.md, "The drop-in proxy").

uvicorn closes a keep-alive connection that stays idle after a response, but a new connection
that sends nothing, or that trickles its request line and header lines a byte at a time, is
kept for ever — each one a socket and a buffer, enough of them and the gateway refuses everyone
(the "slowloris" attack). :class:`HeaderDeadline` is uvicorn's httptools protocol with a
deadline: from a connection's start, and again after each response, the next request's headers
must be complete within ``header_timeout_s``. A connection that sent nothing by then is closed;
one that sent part of a request gets a 408 problem, then is closed. Headers larger than
``max_header_bytes`` (the request line and header lines) get a 400 problem, then the connection
is closed. The body has its own deadline (``read_timeout_s``: the edge in
services/gateway/app.py).

:func:`server_options` gives the uvicorn options that install all of it; ``modelevents
gateway`` and ``services/local/asgi_thread.py`` pass them to ``uvicorn.Config``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.problems import PROBLEM_JSON, GatewayProblem, ProblemCode

__all__ = ["HeaderDeadline", "server_options"]

log = logging.getLogger("modelevents.gateway")

# What a header line costs beyond its name and value (": " and CRLF), and the request line
# beyond its target (method, version, spaces, CRLF), counted against max_header_bytes.
_LINE_OVERHEAD = 4
_REQUEST_LINE_OVERHEAD = 16


class _HeadersRefused(Exception):
    """Raised from a parser callback once the connection was answered: stops the parse."""


class HeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers come too late
    or are too large."""

    header_timeout_s: float = 10.0
    max_header_bytes: int = 16 * 1024
    _deadline: asyncio.TimerHandle | None = None
    _awaiting_headers = True  # the next request's headers are not complete yet
    _received = 0  # bytes received while awaiting them
    _header_size = 0  # the request line's and header lines' bytes, as parsed
    _refused = False  # answered here (408/400): nothing more is read or sent

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._awaiting_headers:
            self._received += len(data)
        super().data_received(data)
        if self._awaiting_headers and self._received > self.max_header_bytes:
            self._too_large()  # headers still incomplete past the limit

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # else the parse stopped on our own answer
            super().send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_size = _REQUEST_LINE_OVERHEAD

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._header_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._header_size += len(name) + len(value) + _LINE_OVERHEAD

    def on_headers_complete(self) -> None:
        if self._header_size > self.max_header_bytes:
            self._too_large()
            raise _HeadersRefused
        self._awaiting_headers = False
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # The next request's headers are awaited from now; their deadline starts when this
        # request's response is complete (or they came pipelined already).
        self._awaiting_headers = True
        self._received = 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._awaiting_headers:
            self._arm()  # the next request's headers have their own deadline

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_late(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._awaiting_headers:
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("%s: closed: no complete request headers within %g s (%d bytes received)",
                 client, self.header_timeout_s, self._received)
        if self._received:
            self._refuse(GatewayProblem(ProblemCode.headers_timeout, (
                f"the request's headers did not arrive within {self.header_timeout_s:g} s "
                "(header_timeout_s); send the whole request line and headers at once")))
        else:
            self._refused = True
            self.transport.close()

    def _too_large(self) -> None:
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("%s: closed: request headers over max_header_bytes (%d)", client,
                 self.max_header_bytes)
        self._refuse(GatewayProblem(ProblemCode.malformed_request, (
            f"the request line and headers are over {self.max_header_bytes} bytes "
            "(max_header_bytes in the gateway config); send smaller headers")))

    def _refuse(self, problem: GatewayProblem) -> None:
        """Answer ``problem`` and close the connection; nothing more is read from it."""
        if self._refused:
            return
        self._refused = True
        self._disarm()
        body = problem.encoded()
        status = problem.code.status
        self.transport.write(
            f"HTTP/1.1 {status} {problem.code.status_title}\r\n".encode()
            + b"content-type: " + PROBLEM_JSON.encode()
            + b"\r\nconnection: close\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)
        self.transport.close()


def server_options(config: GatewayConfig) -> dict[str, Any]:
    """The ``uvicorn.Config`` options that serve the gateway on uvloop with httptools, and
    bound a connection's request headers in time (``header_timeout_s``) and size
    (``max_header_bytes``)."""
    protocol = type("HeaderDeadline", (HeaderDeadline,),
                    {"header_timeout_s": config.header_timeout_s,
                     "max_header_bytes": config.max_header_bytes})
    return {"http": protocol, "loop": "uvloop"}
