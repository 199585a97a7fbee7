"""Randomly mutated streams against EVERY adapter of the table (``ADAPTERS``), issue #12.

The hostile-input module (test_hostile_input.py) mutates one value of one frame; this one
mutates several frames of a stream at once, nests mutations, and sometimes shuffles the
frames — what found that OpenAI Responses' ``close()`` raised on a ``type`` that is a list,
and that events could pass the base's type check and still not encode. For each mutated
stream it holds the contract of adapters/base.py:

- ``feed`` and ``close`` never raise;
- every event encodes with the project's codec, decodes back to an equal event, and the
  official Apache Avro library (the interop oracle of tests/schemas/test_interop.py) reads
  the same record from the bytes.

Deterministic and bounded: fixed seeds, a fixed number of streams per seed, drawn from the
adapter's own fixtures (tests/fixtures/<api>/, always present) and from the recorded corpus
(../shared/fixtures; those cases skip loudly when it is absent, and fail in CI).
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import replace
from functools import cache
from typing import Any

import avro.io
import orjson
import pytest

from modelevents.adapters.cassette import looks_like_cassette, read_cassette
from modelevents.adapters.framing import detect_framing, frames_from_bytes
from modelevents.adapters.registry import ADAPTERS, api_for_uri, decoded_docs, detect_api
from modelevents.schemas import codec
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from tests.adapters.test_hostile_input import streams as fixture_streams
from tests.corpus import corpus_files, require_corpus
from tests.paths import CORPUS_DIR
from tests.schemas.test_interop import as_datum, official_schema

APIS = sorted(ADAPTERS)
SEEDS = (1, 2, 3)
STREAMS_PER_SEED = 100  # per adapter and source: 300 mutated streams each
RUN_ID = "run-mutated"

# What a mutation puts in place of a value: wrong types, edge numbers (beyond Avro's int and
# long), strings that look like vocabulary or JSON paths, and hostile characters.
VALUES: tuple[Any, ...] = (
    None, 0, -1, 2**31, -(2**31) - 1, 2**63, 2**70, "", "x", [], {}, [1], {"a": 1}, True, 1.5,
    "text_delta", "$.a[0].b", "$.a", "\x00\"\\")


def mutate(doc: Any, rng: random.Random) -> Any:
    """A copy of ``doc`` with one value replaced or deleted, somewhere along a random path."""
    if rng.random() < 0.2:
        return rng.choice(VALUES)
    if type(doc) is dict and doc:
        key = rng.choice(list(doc))
        doc = dict(doc)
        r = rng.random()
        if r < 0.3:
            del doc[key]
        elif r < 0.6:
            doc[key] = mutate(doc[key], rng)
        else:
            doc[key] = rng.choice(VALUES)
    elif type(doc) is list and doc:
        doc = list(doc)
        i = rng.randrange(len(doc))
        doc[i] = mutate(doc[i], rng)
    return doc


def mutated(frames: tuple[ProviderFrame, ...], rng: random.Random) -> list[ProviderFrame]:
    """About a third of the frames mutated (one to three times each); sometimes shuffled."""
    out = []
    for frame in frames:
        if rng.random() < 0.3:
            try:
                doc = orjson.loads(frame.body)
            except orjson.JSONDecodeError:
                doc = None  # a sentinel or broken body: kept as it is
            if doc is not None:
                for _ in range(rng.randint(1, 3)):
                    doc = mutate(doc, rng)
                # json, not orjson: orjson writes no int beyond 64 bits
                frame = replace(frame, body=json.dumps(doc).encode())
        out.append(frame)
    if rng.random() < 0.3:
        rng.shuffle(out)
    return out


# --- the streams ---------------------------------------------------------------------------------


@cache
def corpus_streams() -> dict[str, tuple[tuple[ProviderFrame, ...], ...]]:
    """Per API, the frames of every recorded stream of the corpus (cassettes' SSE bodies
    included), each stream's API detected as `modelevents normalize --api auto` does."""
    found: dict[str, list[tuple[ProviderFrame, ...]]] = {}
    for path in corpus_files(""):
        body = path.read_bytes()
        bodies = ([(i.body, i.uri) for i in read_cassette(body)
                   if i.content_type.startswith("text/event-stream")]
                  if looks_like_cassette(body) else [(body, None)])
        for raw, uri in bodies:
            try:
                framing = detect_framing(raw)
                if framing == "json":
                    continue  # a whole object, not a stream
                frames = frames_from_bytes(raw, run_key=RUN_ID, provider="", api="",
                                           framing=framing)
                api = api_for_uri(uri) or detect_api(decoded_docs(frames))
            except ModelEventsError:
                continue  # not a recording the table reads: nothing to mutate
            if api in ADAPTERS and frames:
                provider = ADAPTERS[api].default_provider
                found.setdefault(api, []).append(tuple(
                    replace(f, provider=provider, api=api) for f in frames))
    return {api: tuple(s) for api, s in found.items()}


# --- running and checking ------------------------------------------------------------------------


def run(api: str, frames: list[ProviderFrame], run_id: str) -> list[ModelEvent]:
    """Every event of the stream; an exception here is the test's failure (never raises)."""
    adapter = ADAPTERS[api](run_id)
    events: list[ModelEvent] = []
    for frame in frames:
        events += adapter.feed(frame)
    return events + adapter.close()


@cache
def official_reader() -> avro.io.DatumReader:
    return avro.io.DatumReader(official_schema("modelevents.ModelEvent"))  # parsed once


def check_encodes(event: ModelEvent, official_checked: set[bytes]) -> None:
    """The codec encodes it and reads it back equal; official Avro reads the same record."""
    data = codec.encode(event)
    assert codec.decode(data) == event, (event.kind, event.payload)
    if data in official_checked:
        return  # the same bytes were read by official Avro already (mutations repeat often)
    official_checked.add(data)
    decoder = avro.io.BinaryDecoder(io.BytesIO(data[10:]))
    reader = official_reader()
    datum = as_datum(event)
    assert reader.read(decoder) == datum, (event.kind, event.payload)
    # Reading is lenient (an "int" is read as any varint); a Java reader is not. The official
    # writer's validation holds every value to its type's range, as Java's reader would.
    assert avro.io.validate(reader.writers_schema, datum), (event.kind, event.payload)


def fuzz(api: str, sources: tuple[tuple[ProviderFrame, ...], ...]) -> None:
    official_checked: set[bytes] = set()
    for seed in SEEDS:
        rng = random.Random(f"{api}:{seed}")
        for n in range(STREAMS_PER_SEED):
            frames = mutated(rng.choice(sources), rng)
            case = f"{api} seed {seed} stream {n}"
            try:
                events = run(api, frames, f"{RUN_ID}-{seed}-{n}")
            except Exception as exc:  # the contract broken: show the case to replay it
                raise AssertionError(f"{case}: the adapter raised {exc!r}") from exc
            for event in events:
                try:
                    check_encodes(event, official_checked)
                except Exception as exc:
                    raise AssertionError(f"{case}: {event.kind} does not encode: {exc!r}"
                                         ) from exc


@pytest.mark.parametrize("api", APIS)
def test_mutated_fixture_streams(api):
    sources = tuple(frames for _, frames in fixture_streams(api))
    assert sources, f"no fixtures for {api} in tests/fixtures/{api}/"
    fuzz(api, sources)


@pytest.mark.parametrize("api", APIS)
def test_mutated_corpus_streams(api):
    require_corpus()
    sources = corpus_streams().get(api)
    assert sources, f"the corpus at {CORPUS_DIR} holds no stream of {api}"
    fuzz(api, sources)


# --- what the fuzzing found, pinned ----------------------------------------------------------------


def sse(*docs: dict[str, Any]) -> list[ProviderFrame]:
    body = b"".join(b"data: " + json.dumps(d).encode() + b"\n\n" for d in docs)
    return frames_from_bytes(body, run_key=RUN_ID, provider="openai", api="openai-responses",
                             framing="sse")


@pytest.mark.parametrize("name", [[1], {"a": 1}], ids=["list", "object"])
def test_responses_close_reads_a_held_frame_whose_type_is_unhashable(name):
    # Held (sequence 0 never came), released by close(): its lookup raised TypeError there.
    frames = sse({"type": name, "sequence_number": 1},
                 {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "m",
                  "output_index": 0, "content_index": 0, "delta": "hi"})
    events = run("openai-responses", frames, RUN_ID)
    assert [e.payload.provider_type for e in events if e.kind == "unknown"] == [str(name)]
    assert "sequence_gap" in [e.payload.error_type for e in events if e.kind == "error"]
    for event in events:
        check_encodes(event, set())


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("key", ["type", "object", "event_type"])
def test_an_unhashable_event_name_is_unknown_input_not_a_crash(api, key):
    assert not ADAPTERS[api].recognizes({key: [1]})  # detection asks every adapter
    events = run(api, sse({key: [1], "sequence_number": 0}), RUN_ID)
    for event in events:
        check_encodes(event, set())


@pytest.mark.parametrize("index", [2**31, -(2**31) - 1])
def test_an_index_beyond_avro_int_is_emitted_empty_with_an_error(index):
    # Avro's "int" is 32 bits: a larger output_index passed the check (it bounded a long) and
    # was written as a varint no Java reader reads.
    frames = sse({"type": "response.output_text.delta", "sequence_number": 0, "item_id": "m",
                  "output_index": index, "content_index": 0, "delta": "hi"})
    events = run("openai-responses", frames, RUN_ID)
    texts = [e.payload for e in events if e.kind == "text.delta"]
    assert [(t.output_index, t.text) for t in texts] == [(0, "hi")]
    assert any(e.kind == "error" and e.payload.error_type == "unexpected_shape"
               and "text.delta.output_index (int)" in e.payload.message for e in events)
    for event in events:
        check_encodes(event, set())


def test_an_index_within_avro_int_is_kept():
    frames = sse({"type": "response.output_text.delta", "sequence_number": 0, "item_id": "m",
                  "output_index": 2**31 - 1, "content_index": 0, "delta": "hi"})
    texts = [e.payload for e in run("openai-responses", frames, RUN_ID) if e.kind == "text.delta"]
    assert [t.output_index for t in texts] == [2**31 - 1]
