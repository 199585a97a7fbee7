"""One provider object, several arrival paths, through the real pipeline (worker subprocess, real
broker): a stream resumed with an overlap, and a poll and a webhook that overtake the stream
announcing their object. Nothing lost, nothing twice in ``events``, dead letters where the
processor's "Run key resolution" (services/processor/app.py) says there are.
"""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from modelevents.adapters.registry import normalize_file, translate
from modelevents.schemas.end_of_input import end_of_input, is_end_of_input
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import internal_topics
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.pipeline import (
    FIXTURES,
    Published,
    assert_run_as_normalized,
    claim_recorded,
    collect,
    committed,
    feed,
    fixture_frames,
    run,
)

pytestmark = pytest.mark.kafka

STREAM = FIXTURES / "openai-responses" / "text-with-usage.sse"  # sequence_number 0..11, resp_text


def _reserialised(frame: ProviderFrame) -> bytes:
    """The frame's JSON with its keys in another order, as OpenAI re-serialises replayed events."""
    event = orjson.loads(frame.body)
    return orjson.dumps(dict(reversed(list(event.items()))))


def test_a_resumed_stream_that_overlaps_the_first_gives_each_event_once(
        settings: PipelineSettings, start_worker) -> None:
    worker = start_worker()
    # The connection drops after sequence_number 7; the gateway resumes the response with
    # GET /v1/responses/{id}?stream=true&starting_after=4 (reference/openai.md §9: events with a
    # sequence_number > 4, re-serialised), so the second stream repeats 5, 6 and 7 (two text
    # deltas among them) in other bytes, under a stream id of its own, keyed by the same run —
    # and, the stream being one logical stream, without an end-of-stream marker at the cut.
    run_id, uncut = fixture_frames(STREAM)
    uncut = [f for f in uncut if not is_end_of_input(f)]
    numbers = [orjson.loads(f.body)["sequence_number"] for f in uncut]
    assert numbers == list(range(len(uncut)))
    first = uncut[:8]
    resumed = [dataclasses.replace(f, stream_id="s1", frame_id=f"s1:{n}", index=n,
                                   body=_reserialised(f))
               for n, f in enumerate(uncut[5:])]
    assert resumed[0].body != uncut[5].body and orjson.loads(resumed[0].body) == orjson.loads(uncut[5].body)
    frames = first + resumed
    frames += [end_of_input(frames[-1], "stream"), end_of_input(frames[-1], "run")]
    expected = normalize_file(STREAM).events

    async def scenario() -> Published:
        await feed(settings, frames, duplicate=0.2, seed=11)
        return await collect(settings, lambda p: p.complete(run_id, len(expected)),
                             lambda: worker.log_text()[-3000:])

    published = run(scenario())
    by_seq = published.deduped(run_id)  # also: no two different events under one seq
    assert sorted(by_seq) == list(range(len(expected))), "seq contiguous, nothing numbered twice"
    got = [by_seq[seq] for seq in range(len(expected))]
    # Each event once: what `normalize` gives for the uncut stream, kind by kind, payload by
    # payload; every record on `events` is one of these (redeliveries repeat a (run_id, seq)).
    assert [(e.kind, e.payload) for e in got] == [(e.kind, e.payload) for e in expected]
    assert {e.event_id for e in published.events[run_id]} == {e.event_id for e in got}
    assert len({e.event_id for e in got}) == len(expected)
    # The overlap was recognised by sequence number, not by bytes: what came after the cut was
    # translated from the resumed stream's (re-serialised) frames.
    resumed_bodies = {f.body for f in resumed}
    after_cut = [e for e in got if e.source.frame_id.startswith("s1:")]
    assert after_cut and all(e.envelope.body in resumed_bodies for e in after_cut)
    assert [e.kind for e in after_cut][-2:] == ["usage", "run.finished"]
    # The final RunState is what `modelevents normalize --state` gives for the uncut stream.
    assert published.runs[run_id] == run_state_of(expected, run_id=run_id, tenant=expected[0].tenant)
    assert published.runs[run_id].status == "completed" and not published.runs[run_id].needs_reconciliation
    assert published.dead == []


def test_a_poll_and_a_webhook_before_the_stream_start_a_run_of_their_own_reported_on_dlq(
        settings: PipelineSettings, start_worker) -> None:
    worker = start_worker()
    # A background response: OpenAI's webhook for it, and the poll the gateway makes on it, come
    # in keyed by the response id (all the gateway knows of them) and are processed before the
    # stream that announces that id. The documented behaviour ("Run key resolution"): they start
    # a run named by the response id — the webhook notification adds no event, the poll the
    # whole response — which is not merged into the stream's run afterwards. The stream's run
    # claims the id all the same, the split is dead-lettered (stage resolve, UnmergedRun), and
    # what is keyed by the id from then on (a second webhook delivery, a second poll) goes to
    # the stream's run, which has said it all already: it adds nothing there.
    run_id, stream = fixture_frames(STREAM)
    response = orjson.loads(next(f for f in reversed(stream) if not is_end_of_input(f)).body)["response"]
    object_id = response["id"]

    def webhook(delivery: str) -> ProviderFrame:
        return ProviderFrame(
            frame_id=f"{delivery}:0", run_key=object_id, provider="openai", api="openai-responses",
            transport="webhook", received_at=0, content_type="application/json", stream_id=delivery,
            body=orjson.dumps({"object": "event", "id": delivery, "type": "response.completed",
                               "created_at": 1767225600, "data": {"id": object_id}}))

    def poll(name: str) -> ProviderFrame:
        return ProviderFrame(
            frame_id=f"{name}:0", run_key=object_id, provider="openai", api="openai-responses",
            transport="poll", received_at=0, content_type="application/json", stream_id=name,
            body=orjson.dumps(response))

    early = [webhook("evt_1"), poll("p1")]
    early.append(end_of_input(early[-1], "stream"))
    late = [webhook("evt_2"), poll("p2")]
    late.append(end_of_input(late[-1], "stream"))
    expected_early = translate([f for f in early if not is_end_of_input(f)], "openai-responses",
                               object_id)
    for seq, event in enumerate(expected_early):
        event.seq = seq
    assert expected_early and expected_early[0].kind == "run.started"
    assert expected_early[-1].kind == "run.finished"
    expected_stream = normalize_file(STREAM).events

    async def scenario() -> Published:
        await feed(settings, early)
        # Processed before the stream: its run is complete on `runs` before the stream is fed.
        await collect(settings, lambda p: p.complete(object_id, len(expected_early)),
                      lambda: worker.log_text()[-3000:])
        await feed(settings, stream)
        await claim_recorded(settings, object_id)
        await feed(settings, late)
        # The late frames went to the stream's run (re-keyed) and were committed there:
        # whatever they gave is published by now.
        await committed(settings, internal_topics(settings)["rerouted"], len(late))
        return await collect(settings, lambda p: p.complete(run_id, len(expected_stream))
                             and p.complete(object_id, len(expected_early)) and bool(p.dead),
                             lambda: worker.log_text()[-3000:])

    published = run(scenario())
    # Nothing lost: the early frames' run holds what they carried, once, seq 0..n-1 ...
    early_by_seq = published.deduped(object_id)
    assert [early_by_seq[s] for s in range(len(expected_early))] == expected_early
    assert sorted(early_by_seq) == list(range(len(expected_early)))
    assert published.runs[object_id] == run_state_of(expected_early, run_id=object_id,
                                                     tenant=expected_early[0].tenant)
    # ... and the stream's run exactly what `normalize` gives for the stream: the late webhook
    # and poll, routed to it, added nothing.
    assert_run_as_normalized(published, STREAM)
    assert {e.event_id for e in published.events[run_id]} == {e.event_id for e in expected_stream}
    assert published.runs[run_id].provider_object_ids == [object_id]
    # The split is on dlq, once, naming both runs.
    [letter] = published.dead
    assert (letter.stage, letter.error_type, letter.run_key) == ("resolve", "UnmergedRun", run_id)
    assert object_id in letter.reason and run_id in letter.reason
    assert letter.topic == internal_topics(settings)["aliases"] and letter.record == run_id.encode()
