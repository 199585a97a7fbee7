"""Which headers cross the drop-in proxy (services/gateway/proxy/headers.py): hop-by-hop headers
never do, the proxy's own never reach the provider, the client's key wins over the gateway's,
and the rate-limit and request-id headers reach the client unchanged."""

from __future__ import annotations

from modelevents.services.gateway.proxy.headers import (
    has_key,
    request_headers,
    response_headers,
)

GATEWAY_KEY = {"authorization": "Bearer sk-gateway"}


def test_hop_by_hop_and_own_headers_stay_and_the_rest_goes_upstream() -> None:
    sent = dict(request_headers([
        ("Host", "gateway:8080"), ("Content-Length", "12"), ("Connection", "keep-alive, x-hop"),
        ("x-hop", "1"), ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
        ("Transfer-Encoding", "chunked"), ("Proxy-Authorization", "Basic eA=="),
        ("x-modelevents-token", "me-token"), ("x-modelevents-run-id", "run_1"),
        ("Authorization", "Bearer sk-client"), ("OpenAI-Beta", "responses=v1"),
        ("x-stainless-retry-count", "1"), ("Content-Type", "application/json"),
    ], GATEWAY_KEY))
    assert sent == {"Authorization": "Bearer sk-client", "OpenAI-Beta": "responses=v1",
                    "x-stainless-retry-count": "1", "Content-Type": "application/json",
                    "accept-encoding": "gzip, deflate"}


def test_without_a_key_of_its_own_the_client_gets_the_gateways() -> None:
    sent = request_headers([("anthropic-version", "2023-06-01")],
                           {"x-api-key": "sk-ant-gateway", "anthropic-version": "2023-01-01"})
    # The client's API version stays; only the key is added.
    assert sent == [("anthropic-version", "2023-06-01"), ("x-api-key", "sk-ant-gateway"),
                    ("accept-encoding", "gzip, deflate")]


def test_every_providers_key_header_counts_as_the_clients_key() -> None:
    for name in ("Authorization", "x-api-key", "x-goog-api-key", "api-key"):
        assert has_key([(name, "k")])
        assert ("authorization", "Bearer sk-gateway") not in request_headers([(name, "k")],
                                                                             GATEWAY_KEY)
    assert not has_key([("authorization", "  ")])


def test_encodings_the_tee_cannot_read_are_not_asked_for() -> None:
    sent = dict(request_headers([("Accept-Encoding", "br, gzip;q=0.8, zstd")], {}))
    assert sent["Accept-Encoding"] == "gzip;q=0.8"
    sent = dict(request_headers([("Accept-Encoding", "br")], {}))
    assert sent == {"accept-encoding": "gzip, deflate"}


def test_the_clients_answer_keeps_rate_limit_and_request_headers() -> None:
    upstream = [(b"content-type", b"text/event-stream"), (b"x-ratelimit-remaining-requests",
                b"99"), (b"retry-after-ms", b"20"), (b"x-request-id", b"req_1"),
                (b"transfer-encoding", b"chunked"), (b"connection", b"close, x-private"),
                (b"x-private", b"1"), (b"set-cookie", b"a=1"), (b"set-cookie", b"b=2")]
    assert response_headers(upstream) == [
        (b"content-type", b"text/event-stream"), (b"x-ratelimit-remaining-requests", b"99"),
        (b"retry-after-ms", b"20"), (b"x-request-id", b"req_1"), (b"set-cookie", b"a=1"),
        (b"set-cookie", b"b=2")]
