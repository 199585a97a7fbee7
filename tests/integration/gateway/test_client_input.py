"""What a client names on the forwarded routes is checked before anything is written (issue #27,
carried over), over real HTTP to a running gateway with the real broker: a ``provider`` name
that is not one (a label on every event and metric) is 422, and so is an ``index`` beyond what a
frame's index can hold — never a 500, and nothing of the body on ``frames``. A body Kafka takes
only part of is answered with how many of its frames were kept and why, never "nothing was
kept"."""

from __future__ import annotations

import secrets
import time

import httpx
import pytest

from modelevents.services.kafka import topics
from modelevents.services.kafka.incremental_configs import set_topic_configs
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.gateway.test_edge import (  # noqa: F401 (fixtures)
    TOKEN,
    frames_written,
    gateway,
    start_gateway,
)
from tests.integration.gateway.test_problems import assert_problem
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import neutral

pytestmark = pytest.mark.kafka

BEARER = {"Authorization": f"Bearer {TOKEN}"}
SSE = {**BEARER, "content-type": "text/event-stream"}
BODY = (b'data: {"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}'
        b"\n\n" * 3)
LONG_MAX = 2**63 - 1


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


def forward(gateway: ServedApp, run_id: str, **params: str) -> httpx.Response:
    return httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=BODY, timeout=30,
                      params={"api": "openai-responses", **params}, headers=SSE)


@pytest.mark.parametrize("provider", ["x" * 65, "Groq", "open ai", "evil\u202e", "1abc",
                                      "a/b", "groq\\n"])
def test_a_provider_that_is_no_name_is_refused(gateway, pipeline_settings: PipelineSettings,
                                               provider: str) -> None:
    refused = assert_problem(forward(gateway, new_run_id(), provider=provider), 422)
    assert "provider" in refused["detail"] and "lowercase" in refused["detail"]
    for named in ({"provider": provider}, {"request": neutral(provider, None, "m")}):
        inputs = httpx.post(f"{gateway.url}/v1/runs/{new_run_id()}/input", headers=BEARER,
                            timeout=30, json={"api": "openai-chat", "model": "m",
                                              "request": neutral("openai", None, "m"), **named})
        assert "lowercase" in assert_problem(inputs, 422)["detail"]
    assert frames_written(pipeline_settings) == []


def test_a_provider_name_of_a_compatible_server_is_kept(gateway, pipeline_settings) -> None:
    run_id = new_run_id()
    answer = forward(gateway, run_id, provider="azure-openai.eu_1")
    assert answer.status_code == 200, answer.text
    written = frames_written(pipeline_settings)
    assert {f.provider for f in written} == {"azure-openai.eu_1"}
    assert [f.frame_id for f in written if f.run_key == run_id][:3] == ["s0:0", "s0:1", "s0:2"]


@pytest.mark.parametrize("index", [str(10**30), str(LONG_MAX + 1), str(LONG_MAX),
                                   str(LONG_MAX - 2)])
def test_an_index_no_frame_can_have_is_422(gateway, pipeline_settings, index: str) -> None:
    # LONG_MAX - 2: the three frames fit, the end-of-stream marker after them would not.
    refused = assert_problem(forward(gateway, new_run_id(), index=index), 422)
    assert "largest frame index" in refused["detail"]
    assert frames_written(pipeline_settings) == []


def test_the_last_index_that_fits_is_taken(gateway, pipeline_settings) -> None:
    answer = forward(gateway, new_run_id(), index=str(LONG_MAX - 3), end="stream")
    assert answer.status_code == 200, answer.text
    assert answer.json()["next_index"] == LONG_MAX


def _limit_frames_records(settings: PipelineSettings, max_bytes: int) -> None:
    async def limit() -> None:
        admin = await topics._admin(settings)
        try:
            failed = await set_topic_configs(
                admin, {settings.topic("frames"): {"max.message.bytes": str(max_bytes)}})
        finally:
            await admin.close()
        assert set(failed.values()) == {None}, failed
    run(limit())


def test_a_frame_larger_than_the_topic_takes_is_413_counting_the_frames_kept(
        gateway, pipeline_settings: PipelineSettings) -> None:
    # A cluster whose frames topic takes smaller records than the project writes (300 kB, the
    # gateway's batches are up to 256 KiB): frame 300 of 305 is refused by the broker after
    # the 300 before it were written.
    _limit_frames_records(pipeline_settings, 300_000)
    small = (b'data: {"type":"response.output_text.delta","delta":"' + b"y" * 1000
             + b'"}\n\n')
    large = (b'data: {"type":"response.output_text.delta","delta":"' + b"x" * 400_000
             + b'"}\n\n')
    run_id = new_run_id()
    answer = httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", timeout=30,
                        content=small * 300 + large + small * 4, headers=SSE,
                        params={"api": "openai-responses", "end": "none"})
    refused = assert_problem(answer, 413, "record_too_large")
    written = {f.frame_id for f in frames_written(pipeline_settings) if f.run_key == run_id}
    assert {f"s0:{i}" for i in range(300)} <= written and "s0:300" not in written
    assert refused["kept"] == len(written) and refused["frames"] == 305
    assert refused["first_not_kept_index"] == 300
    detail = refused["detail"]
    assert "frame 300" in detail and "max.message.bytes" in detail and "written" in detail
    assert "nothing was kept" not in answer.text and "kafka start" not in answer.text


def test_a_body_not_all_acknowledged_in_time_is_503_counting_the_frames_kept(
        start_gateway, pipeline_settings: PipelineSettings) -> None:
    # One gateway claims the run; another, whose ack_timeout_s no 32 MB body can meet, takes
    # the body: Kafka acknowledges part of it in time (perhaps none), the rest later or never.
    first = start_gateway()
    run_id = new_run_id()
    assert forward(first, run_id, end="none").status_code == 200  # frames 0-2, the claim
    hasty = start_gateway(ack_timeout_s=0.05)
    deadline = time.monotonic() + 60
    while httpx.get(f"{hasty.url}/readyz", timeout=10).status_code != 200:  # the claim is read
        assert time.monotonic() < deadline
        time.sleep(0.2)
    frame = (b'data: {"type":"response.output_text.delta","delta":"' + b"z" * 4000
             + b'"}\n\n')
    body = frame * 8000
    params = {"api": "openai-responses", "index": "3", "end": "none"}
    answer = httpx.post(f"{hasty.url}/v1/runs/{run_id}/frames", content=body, headers=SSE,
                        params=params, timeout=60)
    refused = assert_problem(answer, 503, "kafka_unavailable")
    assert answer.headers["retry-after"] == "5"
    assert refused["frames"] == 8000 and refused["kept"] < 8000
    assert 3 <= refused["first_not_kept_index"] < 8003
    assert "ack_timeout_s" in refused["detail"] and "written" in refused["detail"]
    assert "nothing was kept" not in answer.text and "kafka start" not in answer.text
    # The same body again, as the answer says: every frame is there, those kept twice (the
    # worker drops the copies by frame id).
    again = httpx.post(f"{first.url}/v1/runs/{run_id}/frames", content=body, headers=SSE,
                       params=params, timeout=60)
    assert again.status_code == 200, again.text
    ids = [f.frame_id for f in frames_written(pipeline_settings) if f.run_key == run_id]
    assert set(ids) == {f"s0:{i}" for i in range(8003)}
    assert len(ids) - 8003 >= refused["kept"]
