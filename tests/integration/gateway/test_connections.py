"""A connection must send its request headers in time (issue #27, carried over): over raw
sockets to a real gateway (uvicorn on loopback, the real broker), a connection that sends
nothing and one that trickles its header lines are closed after ``header_timeout_s``, while a
request sent at once, keep-alive between requests, and a body slower than the header deadline
(it has ``read_timeout_s``) still work; headers over ``max_header_bytes`` are a 400 problem
whether they arrive whole or are still coming (services/gateway/connections.py)."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from modelevents.services.local.asgi_thread import ServedApp
from tests.helpers import free_port
from tests.integration.gateway.test_edge import (  # noqa: F401 (fixtures)
    AUTH,
    closed_after,
    connect,
    head,
    read_answer,
    start_gateway,
)
from tests.integration.pipeline import start_gateway_process

pytestmark = pytest.mark.kafka

HEADER_TIMEOUT_S = 1.0
MAX_HEADER_BYTES = 4096
# Far longer than the header timeout: a connection still open then was not closed by it.
WAIT_S = 15.0


@pytest.fixture
def gateway(start_gateway) -> ServedApp:
    return start_gateway(header_timeout_s=HEADER_TIMEOUT_S, max_header_bytes=MAX_HEADER_BYTES)


def test_a_connection_that_sends_nothing_is_closed(gateway) -> None:
    with connect(gateway) as sock:
        assert closed_after(sock, WAIT_S), "an idle new connection stays open"


def test_a_connection_that_trickles_its_headers_is_closed_with_408(gateway) -> None:
    request = head("GET", "/healthz", *(f"X-Slow-{n}: {'a' * 20}\r\n" for n in range(40)))
    answer = b""
    with connect(gateway) as sock:
        sock.settimeout(0.5)
        for byte in request[:40]:  # one byte every 0.5 s: 20 s of headers at most
            try:
                sock.sendall(bytes([byte]))
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if answer == b"" or answer.endswith(b"}"):
                break  # closed (an empty read), or the whole problem read
        else:
            pytest.fail("every header byte was taken: the trickling connection stayed open")
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"headers_timeout" in answer and b"header_timeout_s" in answer
        assert closed_after(sock, WAIT_S)


def test_requests_sent_at_once_and_keep_alive_still_work(gateway) -> None:
    with connect(gateway) as sock:
        for _ in range(3):
            sock.sendall(head("GET", "/healthz"))
            status, data, closed = read_answer(sock)
            assert status == 200 and not closed, data
        # Idle after a response past the header timeout: closed (uvicorn's keep-alive timeout
        # or ours, whichever is first), never kept.
        assert closed_after(sock, WAIT_S)


def test_a_body_slower_than_the_header_deadline_is_still_read(gateway) -> None:
    body = b'data: {"type":"response.created","response":{"id":"resp_1"}}\n\n'
    with connect(gateway) as sock:
        sock.sendall(head("POST", "/v1/runs/run_slow_body/frames?api=responses", AUTH,
                          "Content-Type: text/event-stream\r\n",
                          f"Content-Length: {len(body)}\r\n"))
        time.sleep(2 * HEADER_TIMEOUT_S)  # the headers are in: only read_timeout_s counts now
        sock.sendall(body)
        status, data, _ = read_answer(sock)
        assert status == 200, data


def test_headers_over_max_header_bytes_are_a_400_and_close(gateway) -> None:
    fits = head("GET", "/healthz", f"X-Fits: {'a' * (MAX_HEADER_BYTES - 200)}\r\n")
    whole = head("GET", "/healthz", f"X-Big: {'a' * MAX_HEADER_BYTES}\r\n")
    unfinished = whole[:-4] + b"X-More: " + b"b" * MAX_HEADER_BYTES  # never ends its headers
    with connect(gateway) as sock:
        sock.sendall(fits)
        status, data, closed = read_answer(sock)
        assert status == 200 and not closed, data
    for request in (whole, unfinished):
        with connect(gateway) as sock:
            sock.sendall(request)
            status, data, closed = read_answer(sock)
            # At once, not after the header deadline: the bytes are there.
            assert status == 400, data
            assert b"malformed_request" in data and b"max_header_bytes" in data, data
            assert closed or closed_after(sock, WAIT_S), "the connection stays open"


def test_the_gateway_command_closes_an_idle_connection(pipeline_settings, tmp_path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(f"header_timeout_s: {HEADER_TIMEOUT_S}\n")
    port = free_port()
    process = start_gateway_process(pipeline_settings, port, tmp_path / "gateway.log",
                                    config=config)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            assert closed_after(sock, WAIT_S), "an idle new connection stays open"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
