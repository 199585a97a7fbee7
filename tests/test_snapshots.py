"""tests/snapshots.py and tests/corpus.py: the shared test helpers behave as documented."""

from __future__ import annotations

import pytest

from modelevents.schemas.events import Envelope, EventSource, Media, ModelEvent, Text
from tests import snapshots
from tests.corpus import CORPUS_DIR, corpus_files, require_corpus
from tests.paths import CONFORMANCE_SNAPSHOTS, EXPECTED, FIXTURES


def event(kind, payload) -> ModelEvent:
    return ModelEvent(event_id="e", run_id="r", tenant="t", provider="p", api="a", model=None,
                      kind=kind, source=EventSource("s0:0", 0, "sse"), received_at=0,
                      adapter="x@1", envelope=Envelope("application/json", b"{}"), payload=payload)


EVENTS = [event("text.delta", Text(0, 0, "héllo")),
          event("media.done", Media(1, "image/png", data=b"\x89PNG"))]


@pytest.fixture
def snapshot_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("UPDATE_SNAPSHOTS", raising=False)
    return tmp_path


def test_projection_is_kind_and_payload_only_with_media_summarised():
    lines = snapshots.render(EVENTS).splitlines()
    assert lines[0] == '{"kind":"text.delta","output_index":0,"part_index":0,"text":"héllo",' \
                       '"item_id":null}'
    assert '"data":{"bytes":4,"sha256":"' in lines[1] and "event_id" not in lines[1]


def test_missing_snapshot_fails_with_instructions(snapshot_dir):
    with pytest.raises(AssertionError, match="UPDATE_SNAPSHOTS=1"):
        snapshots.assert_matches_snapshot(snapshot_dir / "absent.jsonl", EVENTS)


def test_update_writes_then_matches_then_diff_on_change(snapshot_dir, monkeypatch):
    two = snapshot_dir / "two.jsonl"
    monkeypatch.setenv("UPDATE_SNAPSHOTS", "1")
    snapshots.assert_matches_snapshot(two, EVENTS)
    assert two.read_text(encoding="utf-8") == snapshots.render(EVENTS)
    monkeypatch.delenv("UPDATE_SNAPSHOTS")
    snapshots.assert_matches_snapshot(two, EVENTS)
    changed = [event("text.delta", Text(0, 0, "hello"))] + EVENTS[1:]
    with pytest.raises(AssertionError) as info:
        snapshots.assert_matches_snapshot(two, changed)
    assert 'event 0 (text.delta) text: expected "héllo", got "hello"' in str(info.value)


def test_a_snapshot_is_a_jsonl_file(snapshot_dir):
    with pytest.raises(ValueError):
        snapshots.assert_matches_snapshot(snapshot_dir / "escape.txt", EVENTS)


def test_corpus_helpers(monkeypatch):
    if CORPUS_DIR.is_dir():
        files = corpus_files("anthropic")
        assert files and all(p.name != "SOURCES.md" for p in files) and files == sorted(files)
    assert corpus_files("no-such-provider") == []
    monkeypatch.setattr("tests.corpus.CORPUS_DIR", CORPUS_DIR / "absent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have the corpus"):
        require_corpus()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="NOT run"):
        require_corpus()


def test_a_recordings_snapshot_is_its_conformance_expected_file():
    # One copy: the adapter tests' snapshot of tests/fixtures/<api>/<file> is the file that
    # `modelevents conformance` compares that recording with.
    path = snapshots.expected_of(FIXTURES / "openai-chat" / "refusal.sse")
    assert path == EXPECTED / "openai-chat" / "refusal.sse.expected.jsonl"
    assert path.is_file()
    assert snapshots.expected_of(FIXTURES / "gemini-generate" / "tool-call-parallel.json-array") == (
        EXPECTED / "gemini-generate" / "tool-call-parallel.json-array.expected.jsonl")
    # Not a recording of tests/fixtures: a corpus file's snapshot is beside the tests that own it.
    assert (CONFORMANCE_SNAPSHOTS / "openai-chat" / "openai-python__4cc50a61.jsonl").is_file()


def test_update_keeps_the_replay_line(snapshot_dir, monkeypatch):
    replayed = snapshot_dir / "replayed.jsonl"
    replayed.write_text(
        '{"replay":{"http_status":429}}\n{"kind":"text.delta","text":"old"}\n', encoding="utf-8")
    monkeypatch.setenv("UPDATE_SNAPSHOTS", "1")
    snapshots.assert_matches_snapshot(replayed, EVENTS)
    written = replayed.read_text(encoding="utf-8").splitlines()
    assert written[0] == '{"replay":{"http_status":429}}' and len(written) == 1 + len(EVENTS)
