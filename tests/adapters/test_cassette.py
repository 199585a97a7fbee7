"""adapters/cassette.py: VCR cassettes (vcrpy and pydantic-ai dialects) → interactions."""

from __future__ import annotations

import base64
import gzip
import zlib
from pathlib import Path

import orjson
import pytest

from modelevents.adapters.cassette import looks_like_cassette, read_cassette
from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.framing import detect_framing
from modelevents.adapters.limits import InputLimits, using_limits
from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.errors import InputError
from tests import paths
from tests.adapters.bombs import (
    gzip_of_zeros,
    one_call_cassette,
    run_limited,
    sse_chunks,
    truncated_gzip,
    yaml_alias_bomb,
)
from tests.corpus import corpus_files, corpus_id, require_corpus

FIXTURES = paths.FIXTURES / "cassettes"
TOOL_LOOP = FIXTURES / "anthropic-tool-loop.yaml"


def test_hand_written_cassette_interactions_in_order():
    interactions = read_cassette(TOOL_LOOP)
    assert [(i.method, i.uri, i.status) for i in interactions] == [
        ("POST", "https://api.anthropic.com/v1/files", 200),
        ("POST", "https://api.anthropic.com/v1/messages?beta=true", 200),
        ("POST", "https://api.anthropic.com/v1/messages", 200),
    ]
    files, tool_turn, text_turn = interactions
    assert files.content_type == "application/json"
    assert tool_turn.content_type == text_turn.content_type == "text/event-stream; charset=utf-8"


def test_parsed_body_is_serialized_as_json():
    files, tool_turn, _ = read_cassette(TOOL_LOOP)
    assert orjson.loads(files.body)["id"] == "file_011CNha8iCJcU1wXNR6q4V8w"
    request = orjson.loads(tool_turn.request_body)
    assert request["stream"] is True and request["tools"][0]["name"] == "get_weather"
    assert files.request_body == b"name=notes.txt"


def test_plain_text_sse_body_is_kept_verbatim():
    _, tool_turn, _ = read_cassette(TOOL_LOOP)
    assert tool_turn.body.startswith(b"event: message_start\ndata: {")
    assert tool_turn.body.endswith(b'data: {"type":"message_stop"}\n\n')
    assert detect_framing(tool_turn.body) == "sse"


def test_gzip_binary_body_is_decompressed():
    _, _, text_turn = read_cassette(TOOL_LOOP)
    assert text_turn.response_headers["content-encoding"] == "gzip"
    assert "It is 4 °C ".encode() in text_turn.body  # UTF-8 survives base64 + gzip
    assert text_turn.body.endswith(b'data: {"type":"message_stop"}\n\n')


def test_reads_bytes_as_well_as_paths():
    assert read_cassette(TOOL_LOOP.read_bytes()) == read_cassette(TOOL_LOOP)
    assert read_cassette(str(TOOL_LOOP)) == read_cassette(TOOL_LOOP)


def test_binary_body_that_is_not_compressed_and_missing_fields():
    raw = base64.b64encode(b'{"ok": true}').decode()
    doc = (
        "interactions:\n"
        "- request: {method: get, uri: 'https://example.test/x'}\n"
        "  response:\n"
        f"    body: {{string: !!binary '{raw}'}}\n"
        "    status: {code: 201}\n"
    ).encode()
    [interaction] = read_cassette(doc)
    assert (interaction.method, interaction.status) == ("GET", 201)
    assert interaction.body == b'{"ok": true}'
    assert interaction.request_body is None and interaction.content_type == ""


def test_gzip_detected_by_magic_without_header():
    packed = base64.b64encode(gzip.compress(b"data: {}\n\n", mtime=0)).decode()
    doc = (
        "interactions:\n"
        "- request: {method: POST, uri: 'https://api.openai.com/v1/chat/completions', body: ''}\n"
        "  response:\n"
        f"    body: {{string: !!binary '{packed}'}}\n"
        "    status: {code: 200, message: OK}\n"
    ).encode()
    assert read_cassette(doc)[0].body == b"data: {}\n\n"


@pytest.mark.parametrize("doc, message", [
    (b"interactions: [\n", "not valid YAML"),
    (b"version: 1\n", "no `interactions` list"),
    (b"- a\n- b\n", "no `interactions` list"),
    (b"interactions:\n- request: {}\n", "interaction 1"),
])
def test_unreadable_cassettes_raise_input_error(doc, message):
    with pytest.raises(InputError, match=message):
        read_cassette(doc)


def test_missing_file_raises_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read cassette"):
        read_cassette(tmp_path / "absent.yaml")


def test_looks_like_cassette():
    assert looks_like_cassette(TOOL_LOOP.read_bytes())  # comments before `interactions:`
    assert looks_like_cassette(b"interactions:\n- request: {}\n")
    assert not looks_like_cassette(b'data: {"interactions": 1}\n\n')
    assert not looks_like_cassette(b'{"interactions": []}')


# --- every cassette of the recorded corpus ----------------------------------------------------

CASSETTES = [p for provider in ("anthropic", "gemini", "openai") for p in corpus_files(provider)
             if p.suffix == ".yaml"]


@pytest.mark.corpus
@pytest.mark.parametrize("path", CASSETTES, ids=corpus_id)
def test_every_corpus_cassette_yields_bodies(path):
    require_corpus()
    interactions = read_cassette(path)
    assert interactions, "no interactions"
    assert any(i.body for i in interactions), "no interaction has a response body"
    for interaction in interactions:
        assert interaction.method in ("GET", "POST", "DELETE")
        assert interaction.uri.startswith("https://")
        assert interaction.status in (200, 400)
        if interaction.body:  # readable in some framing: nothing left compressed
            detect_framing(interaction.body)


@pytest.mark.corpus
def test_gzip_cassettes_match_their_derived_bodies():
    """The corpus ships llm-* bodies decompressed under derived/: ours must be identical."""
    require_corpus()
    derived = [p for provider in ("anthropic", "gemini") for p in corpus_files(provider)
               if p.parent.name == "derived"]
    checked = 0
    for path in derived:
        stem, response = path.name.split(".")[:2]  # test_tools.response2.sse.txt
        cassette = path.parent.parent / f"{stem}.yaml"
        if not cassette.exists():
            continue  # derived/ holds one body whose cassette was not copied
        number = int(response.removeprefix("response"))
        assert read_cassette(cassette)[number - 1].body == path.read_bytes(), path.name
        checked += 1
    assert checked >= 8


# --- hostile cassettes (issue #11 §3): bounded before the memory is spent -------------------

def _read_in_capped_process(path: Path) -> str:
    """read_cassette(path) in a subprocess capped at MEMORY_CAP; what it raised, or 'read'."""
    program = ("import sys\n"
               "from modelevents.adapters.cassette import read_cassette\n"
               "from modelevents.adapters.errors import InputLimitError\n"
               "try:\n"
               "    read_cassette(sys.argv[1])\n"
               "    print('read')\n"
               "except InputLimitError as exc:\n"
               "    print(exc.limit, exc, sep='\\n')\n")
    done = run_limited(["-c", program, str(path)])
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


@pytest.mark.parametrize("build, limit", [
    (lambda: one_call_cassette(gzip_of_zeros()), "max_ratio"),  # 1 MB on disk, 1 GiB inflated
    (yaml_alias_bomb, "max_yaml_alias_nodes"),  # 500 bytes, 387M strings serialized
], ids=["gzip-of-zeros", "yaml-alias-bomb"])
def test_a_bomb_is_refused_under_a_memory_cap(tmp_path, build, limit):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(build())
    limit_hit, message = _read_in_capped_process(path).splitlines()
    assert limit_hit == limit
    assert message.startswith(f"{path}: ") and f"--{limit.replace('_', '-')}" in message


def test_each_decompression_limit_is_enforced_and_named():
    bomb = one_call_cassette(gzip_of_zeros(64 << 20))
    with pytest.raises(InputLimitError) as caught:
        read_cassette(bomb, limits=InputLimits(max_ratio=10_000, max_body_bytes=16 << 20))
    assert caught.value.limit == "max_body_bytes"
    assert "interaction 1's response body decompresses (gzip)" in str(caught.value)
    one = one_call_cassette(gzip_of_zeros(16 << 20))
    two = one + one.split(b"\n", 1)[1]  # the same interaction listed twice
    assert len(read_cassette(two, limits=InputLimits(max_ratio=10_000))) == 2
    with pytest.raises(InputLimitError) as caught:
        read_cassette(two, limits=InputLimits(max_ratio=10_000, max_cassette_bytes=24 << 20))
    assert caught.value.limit == "max_cassette_bytes" and "at interaction 2" in str(caught.value)
    assert len(read_cassette(bomb, limits=InputLimits(max_ratio=10_000))) == 1  # raised: read


def test_a_small_body_may_compress_well_past_the_ratio():
    text = sse_chunks(1) * 2000  # ~200 KB of one repeated frame: compresses ~200x
    [interaction] = read_cassette(one_call_cassette(gzip.compress(text, mtime=0)))
    assert interaction.body == text


def test_a_truncated_gzip_body_is_one_clear_error():
    with pytest.raises(InputError) as caught:
        read_cassette(one_call_cassette(truncated_gzip()), name="cut.yaml")
    assert str(caught.value) == (
        "cassette cut.yaml, interaction 1: the gzip response body is cut short (it ends before "
        "its end-of-stream marker): the recording is incomplete; re-record it")


def test_multi_member_gzip_and_raw_deflate_bodies():
    text = sse_chunks()
    members = gzip.compress(text[:100], mtime=0) + gzip.compress(text[100:], mtime=0)
    assert read_cassette(one_call_cassette(members))[0].body == text
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = packer.compress(text) + packer.flush()
    assert read_cassette(one_call_cassette(raw, encoding="deflate"))[0].body == text
    assert read_cassette(one_call_cassette(zlib.compress(text), encoding="deflate"))[0].body == text


def test_ordinary_aliases_are_read_and_recursive_ones_refused():
    shared = (b"hdrs: &h {content-type: [application/json]}\n"
              b"interactions:\n"
              b"- request: {method: GET, uri: 'https://example.test/a'}\n"
              b"  response: {status: {code: 200}, headers: *h, body: {string: '{}'}}\n"
              b"- request: {method: GET, uri: 'https://example.test/b'}\n"
              b"  response: {status: {code: 200}, headers: *h, parsed_body: {x: 1}}\n")
    assert [i.content_type for i in read_cassette(shared)] == ["application/json"] * 2
    with pytest.raises(InputLimitError, match="max_yaml_alias_nodes"):
        read_cassette(shared, limits=InputLimits(max_yaml_alias_nodes=1))
    recursive = (b"interactions:\n- request: {method: GET, uri: x}\n"
                 b"  response: {status: {code: 200}, parsed_body: &r [*r]}\n")
    with pytest.raises(InputError, match="recursive"):
        read_cassette(recursive)


def test_limits_in_effect_name_the_file():
    with using_limits(InputLimits(max_ratio=2), source="given.yaml"):
        with pytest.raises(InputLimitError) as caught:
            read_cassette(one_call_cassette(gzip_of_zeros(8 << 20)))
    assert str(caught.value).startswith("given.yaml: interaction 1's response body")
    assert str(caught.value).endswith("raise it with --max-ratio")


def test_a_call_whose_body_holds_no_frames_is_skipped_with_why_not_a_crash():
    # An SSE body with no data line gives no frames: it raised IndexError in the registry.
    empty_call = b"""- request:
    method: POST
    uri: https://api.anthropic.com/v1/messages
  response:
    headers:
      content-type:
      - text/event-stream
    body:
      string: ": keep-alive\n\n"
    status:
      code: 200
      message: OK
"""
    cassette = TOOL_LOOP.read_bytes().replace(b"interactions:\n", b"interactions:\n" + empty_call, 1)
    result = normalize_bytes(cassette, framing="cassette")
    assert any("no frames" in line for line in result.skipped), result.skipped
    alone = normalize_bytes(TOOL_LOOP.read_bytes(), framing="cassette", run_id=result.run_id)
    assert [(e.kind, e.payload) for e in result.events] == [
        (e.kind, e.payload) for e in alone.events]
