"""The simulator answers a recorded error whose body is a stream with the bytes recorded.

A VCR cassette can hold an error status whose body was framed as SSE (a proxy or gateway that
reports its error as an event). Such a recording has frames and no object body; the simulator
once answered it with the JSON ``null``.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.scenarios import Scenario, ScenarioRegistry
from modelevents.services.simulator.server import run_in_thread

ERROR_EVENT = ('event: error\n'
               'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
               '\n\n')

CASSETTE = """interactions:
- request:
    body: '{"model":"claude-haiku-4-5","max_tokens":16,"stream":true,"messages":[]}'
    headers:
      content-type:
      - application/json
    method: POST
    uri: https://api.anthropic.com/v1/messages
  response:
    body:
      string: |+
        event: error
        data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

    headers:
      content-type:
      - text/event-stream
    status:
      code: 529
      message: Overloaded
"""


def test_a_recorded_error_status_with_a_stream_body_is_answered_with_its_bytes(
        tmp_path: Path) -> None:
    cassette = tmp_path / "overloaded-as-sse.yaml"
    cassette.write_text(CASSETTE)
    registry = ScenarioRegistry()
    registry.scenarios["test/overloaded-as-sse"] = Scenario(
        "test/overloaded-as-sse", cassette, "anthropic-messages")
    handle = run_in_thread(Simulator(registry, validate=False).app)
    try:
        response = httpx.post(
            f"{handle.base_url}/v1/messages", timeout=30,
            headers={"x-simulator-scenario": "test/overloaded-as-sse"},
            json={"model": "claude-haiku-4-5", "max_tokens": 16, "stream": True,
                  "messages": [{"role": "user", "content": "hi"}]})
    finally:
        handle.stop()
    assert response.status_code == 529
    assert response.content == ERROR_EVENT.encode()
