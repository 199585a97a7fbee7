"""Runs larger than a Kafka record, beside ordinary runs on one partition (issue #11 §1).

Before pieces, a run whose text passed ~1 MiB made a ``text.done`` event and a changelog value
larger than the producer's ``max_request_size``: the worker crashed with MessageSizeTooLarge,
the batch was never committed, every restart crashed again and every run on the partition
stalled. Here, on one partition of the real broker: a Chat Completions run of 2 MB and one of
20 MB of text in 1,000-character deltas, an OpenAI Responses tool call whose 5 MB arguments come
in one delta (and again whole in its done frames), and a Gemini image of 8 MB in one frame — with
ordinary recordings fed between them. Every run must come out exactly as ``modelevents
normalize`` gives it, every record written must fit the record limit, the worker must stay up,
and the text, arguments and image must be rebuilt exactly from ``events`` alone.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import orjson
import pytest
from aiokafka import TopicPartition

from modelevents.schemas.events import ModelEvent
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.pieces import assemble
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import (
    FIXTURES,
    Worker,
    assert_run_as_normalized,
    collect,
    expected_counts,
    feed,
    fixture_frames,
    run,
)

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19800, scope="module")


def _sse(*docs: dict | bytes) -> bytes:
    return b"".join(b"data: " + (d if isinstance(d, bytes) else orjson.dumps(d)) + b"\n\n"
                    for d in docs)


def _text(size: int, seed: str) -> list[str]:
    """``size`` characters in 1,000-character deltas that differ (multi-byte ones among them)."""
    word = hashlib.sha256(seed.encode()).hexdigest()[:12] + "é漢 "
    unit = (word * (1000 // len(word) + 1))[:1000]
    return [f"{i:07d}" + unit[7:] for i in range(size // 1000)]


def chat_run(deltas: list[str], completion_id: str) -> bytes:
    chunk = {"id": completion_id, "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    return _sse(*[{**chunk, "choices": [{"index": 0, "delta": {"content": d}}]} for d in deltas],
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                b"[DONE]")


def responses_tool_run(arguments: str, name: str = "write_file", whole_at_done: bool = True
                       ) -> bytes:
    """A function call whose arguments come in one delta; ``whole_at_done=False``: the item's
    done does not repeat them (the tool.call then takes the held ones, elided past the hold)."""
    response = {"id": "resp_big", "object": "response", "status": "in_progress",
                "model": "gpt-5-mini", "output": []}
    item = {"id": "fc_big", "type": "function_call", "status": "in_progress", "arguments": "",
            "call_id": "call_big", "name": name}
    done_item = {**item, "status": "completed"}
    if whole_at_done:
        done_item["arguments"] = arguments
    return _sse(
        {"type": "response.created", "sequence_number": 0, "response": response},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": item},
        {"type": "response.function_call_arguments.delta", "sequence_number": 2,
         "item_id": "fc_big", "output_index": 0, "delta": arguments},
        {"type": "response.function_call_arguments.done", "sequence_number": 3,
         "item_id": "fc_big", "output_index": 0, "arguments": arguments},
        {"type": "response.output_item.done", "sequence_number": 4, "output_index": 0,
         "item": done_item},
        {"type": "response.completed", "sequence_number": 5,
         "response": {**response, "status": "completed", "output": [done_item],
                      "usage": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}}})


def gemini_image_run(image: bytes) -> bytes:
    return _sse({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Here it is."},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(image).decode()}}]},
        "finishReason": "STOP"}], "modelVersion": "gemini-2.5-flash-image",
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1290,
                          "totalTokenCount": 1295}})


def _whole(events: list[ModelEvent], kind: str, field: str, delta_kind: str) -> str | bytes:
    """The value of a done event as a consumer rebuilds it from ``events`` alone."""
    done = next(e for e in events if e.kind == kind)
    if done.elided is None:
        return getattr(done.payload, field)
    assert done.elided.field == field and done.elided.from_kind == delta_kind
    return "".join(getattr(e.payload, field) for e in events if e.kind == delta_kind)


async def _record_sizes(settings: PipelineSettings) -> dict[str, int]:
    """The largest record value on every topic the worker writes."""
    names = [settings.topic(t) for t in ("events", "runs", "dlq")]
    names += list(changelog_topics(settings).values())
    consumer = clients.make_consumer(settings)
    await clients.start_client(consumer, settings)
    try:
        tps = [TopicPartition(n, p) for n in names for p in range(settings.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        largest = dict.fromkeys(names, 0)
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    largest[tp.topic] = max(largest[tp.topic], len(record.value or b""))
        return largest
    finally:
        await consumer.stop()


def test_runs_larger_than_a_record_complete_beside_ordinary_runs_on_one_partition(
        make_settings, tmp_path: Path) -> None:
    settings = make_settings(partitions=1)
    text_2mb, text_20mb = _text(2_000_000, "two"), _text(20_000_000, "twenty")
    arguments = orjson.dumps({"path": "big.txt", "content": "".join(_text(5_000_000, "args"))}
                             ).decode()
    image = hashlib.shake_256(b"image").digest(8_000_000)
    big = {"chat-2mb.sse": chat_run(text_2mb, "chatcmpl-2mb"),
           "chat-20mb.sse": chat_run(text_20mb, "chatcmpl-20mb"),
           "responses-5mb-arguments.sse": responses_tool_run(arguments),
           "gemini-8mb-image.sse": gemini_image_run(image)}
    paths = []
    ordinary = [FIXTURES / "openai-chat" / "tool-calls-finish-stop.sse",
                FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse",
                FIXTURES / "openai-responses" / "text-with-usage.sse"]
    for (name, body), neighbour in zip(big.items(), ordinary + ordinary[:1]):
        path = tmp_path / name
        path.write_bytes(body)
        paths += [neighbour, path]
    # As the issue reproduced it: the runs are on the log first, then the worker starts.
    run(feed(settings, [f for p in paths for f in fixture_frames(p)[1]]))
    worker = Worker(settings, tmp_path, "big-worker")
    try:
        worker.wait_ready()
        counts = expected_counts(paths)
        published = run(collect(settings, lambda p: all(p.complete(r, n)
                                                       for r, n in counts.items())))
        for path in paths:
            assert_run_as_normalized(published, path)
        assert worker.process.poll() is None, worker.log_text()[-3000:]
        assert "could not be completed" not in worker.log_text()
        assert not published.dead, [d.reason for d in published.dead]

        largest = run(_record_sizes(settings))
        assert max(largest.values()) <= MAX_RECORD_BYTES, largest

        def events_of(name: str) -> list[ModelEvent]:
            run_id = fixture_frames(tmp_path / name)[0]
            by_seq = published.deduped(run_id)
            return assemble(by_seq[s] for s in sorted(by_seq))

        for name, text in (("chat-2mb.sse", text_2mb), ("chat-20mb.sse", text_20mb)):
            assert _whole(events_of(name), "text.done", "text", "text.delta") == "".join(text)
        tool = events_of("responses-5mb-arguments.sse")
        assert _whole(tool, "tool.call", "arguments", "tool.call.delta") == arguments
        media = next(e for e in events_of("gemini-8mb-image.sse") if e.kind == "media.done")
        assert media.payload.data == image
    finally:
        worker.close()
