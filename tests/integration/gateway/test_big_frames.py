"""A forwarded stream of 7 MB through the running gateway (issue #11 §1: "one
``POST /v1/runs/{id}/frames`` of 7 MB does the same through the gateway"), over real HTTP into
the real broker and the real worker: one SSE event of ~7 MB (one frame), and a batch of 7,000
events of 1 KB (7 MB of frames). Both are accepted; the big frame travels on ``frames`` in pieces
(``clients.send_frame``, schemas/pieces.py) that the worker assembles; both runs complete on
``events`` with exactly the text that was sent; and no record on any topic — ``frames``,
``run-owners``, what the worker writes — is larger than ``MAX_RECORD_BYTES``.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.pieces import assemble
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import serve_in_thread
from tests.integration.gateway.test_ownership import new_run_id
from tests.integration.pipeline import HANG_GUARD_S, collect, run
from tests.integration.processor.test_big_runs import _record_sizes, _text, _whole, chat_run

pytestmark = pytest.mark.kafka

SEVEN_MB = 7_000_000


async def frames_of(settings: PipelineSettings, run_ids: set[str]) -> tuple[list, int]:
    """The frames records of ``run_ids`` (decoded), and the largest record on ``frames`` and
    ``run-owners``."""
    frames, largest = [], 0
    for topic in ("frames", "run-owners"):
        async for record in clients.read_records(settings, topic, timeout=10.0, to_end=True):
            largest = max(largest, len(record.raw or b""))
            if topic == "frames" and record.key_text in run_ids:
                frames.append(record.value)
    return frames, largest


def test_a_7mb_forward_travels_in_pieces_and_completes(settings, start_worker, tmp_path: Path):
    worker = start_worker()
    one_event_text = ["".join(_text(SEVEN_MB, "one-frame"))]  # one delta: one ~7 MB SSE event
    batch_text = _text(SEVEN_MB, "batch")  # 7,000 deltas of 1,000 characters
    bodies = {new_run_id(): chat_run(one_event_text, "chatcmpl-one"),
              new_run_id(): chat_run(batch_text, "chatcmpl-batch")}
    assert all(len(body) > SEVEN_MB for body in bodies.values())
    with serve_in_thread(create_app(GatewayConfig(kafka=settings)), name="gateway") as gateway:
        for run_id, body in bodies.items():
            answer = httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=body,
                                params={"api": "openai-chat", "end": "run"},
                                headers={"content-type": "text/event-stream"},
                                timeout=HANG_GUARD_S)
            assert answer.status_code == 200, answer.text
            assert answer.json()["accepted"] == body.count(b"\n\n")

    expected = {run_id: normalize_bytes(body, run_id=run_id, api="openai-chat",
                                        framing="sse").events
                for run_id, body in bodies.items()}
    published = run(collect(settings, lambda p: all(p.complete(r, len(e))
                                                    for r, e in expected.items()),
                            worker.log_text))
    assert not published.dead, [d.reason for d in published.dead]
    assert worker.process.poll() is None, worker.log_text()[-3000:]
    for (run_id, events), text in zip(expected.items(), (one_event_text, batch_text)):
        by_seq = published.deduped(run_id)
        got = [by_seq[seq] for seq in range(len(events))]
        assert [e.kind for e in got] == [e.kind for e in events]
        assert published.runs[run_id].status == "completed"
        whole = assemble(got)
        assert whole[-1].kind == "run.finished"
        assert _whole(whole, "text.done", "text", "text.delta") == "".join(text)

    frames, largest_in = run(frames_of(settings, set(bodies)))
    one_run = next(iter(bodies))
    pieces = [f for f in frames if f.run_key == one_run and f.piece is not None]
    # The ~7 MB event went as pieces of one frame id, none of them a record too big.
    assert len({f.frame_id for f in pieces}) == 1
    assert len(pieces) == pieces[0].piece.count >= SEVEN_MB // MAX_RECORD_BYTES
    largest_out = run(_record_sizes(settings))
    assert max(largest_in, *largest_out.values()) <= MAX_RECORD_BYTES, (largest_in, largest_out)
