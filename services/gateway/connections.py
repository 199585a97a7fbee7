"""How long a connection may take to send a request's headers: ``header_timeout_s``.

uvicorn closes a keep-alive connection that stays idle after a response, but a new connection
that sends nothing, or that trickles its request line and header lines a byte at a time, is
kept for ever — each one a socket and a buffer, enough of them and the gateway refuses everyone
(the "slowloris" attack). :class:`HeaderDeadline` is uvicorn's h11 protocol with a deadline:
from a connection's start, and again after each response, the next request's headers must be
complete within ``header_timeout_s``. A connection that sent nothing by then is closed; one that
sent part of a request gets a 408 problem, then is closed. The headers' size is bounded by h11
(``max_header_bytes``: larger is 400). The body has its own deadline (``read_timeout_s``: the
edge in services/gateway/app.py).

:func:`server_options` gives the uvicorn options that install both; ``modelevents gateway`` and
``services/local/asgi_thread.py`` pass them to ``uvicorn.Config``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.problems import PROBLEM_JSON, GatewayProblem, ProblemCode

__all__ = ["HeaderDeadline", "server_options"]

log = logging.getLogger("modelevents.gateway")


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers come too late."""

    header_timeout_s: float = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or it ended)
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
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
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        received, _closed = self.conn.trailing_data
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.info("%s: closed: no complete request headers within %g s (%d bytes received)",
                 client, self.header_timeout_s, len(received))
        if received:
            body = GatewayProblem(ProblemCode.headers_timeout, (
                f"the request's headers did not arrive within {self.header_timeout_s:g} s "
                "(header_timeout_s); send the whole request line and headers at once")).encoded()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: " + PROBLEM_JSON.encode()
                + b"\r\nconnection: close\r\ncontent-length: " + str(len(body)).encode()
                + b"\r\n\r\n" + body)
        self.transport.close()


def server_options(config: GatewayConfig) -> dict[str, Any]:
    """The ``uvicorn.Config`` options that bound a connection's request headers in time
    (``header_timeout_s``) and size (``max_header_bytes``)."""
    protocol = type("HeaderDeadline", (HeaderDeadline,),
                    {"header_timeout_s": config.header_timeout_s})
    return {"http": protocol, "h11_max_incomplete_event_size": config.max_header_bytes}
