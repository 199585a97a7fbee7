"""`modelevents conformance`, run as a user runs it: a subprocess of the CLI, over the project's own
suite (tests/fixtures + tests/expected) and over directories laid out as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modelevents.adapters.conformance import EXPECTED_SUFFIX
from tests.corpus import CORPUS_DIR, require_corpus
from tests.paths import TESTS_DIR

FIXTURES, EXPECTED = TESTS_DIR / "fixtures", TESTS_DIR / "expected"
CLI = [sys.executable, "-m", "modelevents.services.cli", "conformance"]

# A capture a user might add: a Chat Completions stream, as an SSE body.
USER_CAPTURE = b"".join(
    b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in [
        {"id": "c1", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"id": "c1", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
    ]) + b"data: [DONE]\n\n"


def conformance(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def own_recordings() -> list[str]:
    return sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*") if p.is_file())


def suite_copy(tmp_path: Path, *names: str) -> Path:
    """A user-laid-out suite: the named recordings with their expected files beside them."""
    root = tmp_path / "suite"
    for name in names:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / name, target)
        shutil.copyfile(EXPECTED / (name + EXPECTED_SUFFIX),
                        target.with_name(target.name + EXPECTED_SUFFIX))
    return root


def test_the_projects_own_suite_passes_file_by_file():
    result = conformance()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sorted(line.split()[1] for line in lines) == own_recordings()
    assert all(line.startswith("match ") for line in lines), result.stdout
    assert "all pass" in result.stderr


def test_the_projects_recordings_named_as_dir_are_still_its_suite():
    result = conformance(FIXTURES, "--api", "gemini-generate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "match       gemini-generate/text-stream.sse" in result.stdout


def test_every_expected_file_of_the_suite_has_its_recording():
    recordings = set(own_recordings())
    orphans = [p.relative_to(EXPECTED).as_posix() for p in EXPECTED.rglob(f"*{EXPECTED_SUFFIX}")
               if p.relative_to(EXPECTED).as_posix()[:-len(EXPECTED_SUFFIX)] not in recordings]
    assert orphans == []


def test_json_report_of_the_suite():
    result = conformance("--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is True
    assert report["counts"] == {"match": len(own_recordings())}
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["openai-chat/refusal.sse"]["api"] == "openai-chat"
    assert by_path["cassettes/anthropic-tool-loop.yaml"]["api"] == "anthropic-messages"


def test_an_altered_expected_file_fails_naming_file_event_and_field(tmp_path):
    root = suite_copy(tmp_path, "openai-chat/refusal.sse", "anthropic-messages/malformed-frame.sse")
    expected = root / "openai-chat" / f"refusal.sse{EXPECTED_SUFFIX}"
    lines = expected.read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if '"kind":"refusal"' in line)
    event = json.loads(lines[index])
    event["text"] = "I can help with that."
    lines[index] = json.dumps(event)
    del lines[-1]  # and the run's finish: an event the adapter produces and the file lacks
    expected.write_text("\n".join(lines) + "\n", encoding="utf-8")

    result = conformance(root)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "match       anthropic-messages/malformed-frame.sse" in out
    assert "differ      openai-chat/refusal.sse" in out
    assert (f'event {index} (refusal) text: expected "I can help with that.", '
            f'got "I can\'t help with that."') in out
    assert f"event {len(lines)} (run.finished): produced, not expected: " in out
    assert "FAILED: 1" in result.stderr

    report = json.loads(conformance(root, "--json").stdout)
    [failed] = [f for f in report["files"] if f["status"] != "match"]
    assert failed["path"] == "openai-chat/refusal.sse"
    assert failed["differences"][0] == {
        "expected_index": index, "actual_index": index, "kind": "refusal", "field": "text",
        "expected": "I can help with that.", "got": "I can't help with that."}


def test_a_user_capture_without_expected_events_fails_until_update_writes_them(tmp_path):
    capture = tmp_path / "captures" / "openai-chat" / "hello.sse"
    capture.parent.mkdir(parents=True)
    capture.write_bytes(USER_CAPTURE)
    (tmp_path / "captures" / "README.md").write_text("my captures\n")  # notes are not recordings

    first = conformance(tmp_path / "captures")
    assert first.returncode == 1
    assert "no-expected openai-chat/hello.sse" in first.stdout and "--update" in first.stdout

    updated = conformance(tmp_path / "captures", "--update")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "created     openai-chat/hello.sse  (7 events written to" in updated.stdout
    written = capture.with_name("hello.sse" + EXPECTED_SUFFIX).read_text(encoding="utf-8")
    events = [json.loads(line) for line in written.splitlines()]
    assert [e["kind"] for e in events] == [
        "run.started", "message.started", "text.delta", "text.delta", "text.done",
        "message.finished", "run.finished"]
    assert events[4]["text"] == "Hello" and events[-1]["status"] == "completed"

    again = conformance(tmp_path / "captures")
    assert again.returncode == 0 and again.stdout.splitlines() == ["match       openai-chat/hello.sse"]


def test_expected_files_in_a_mirrored_tree(tmp_path):
    root = suite_copy(tmp_path, "gemini-generate/text-stream.sse")
    mirror = tmp_path / "mirror" / "gemini-generate"
    mirror.mkdir(parents=True)
    beside = root / "gemini-generate" / f"text-stream.sse{EXPECTED_SUFFIX}"
    shutil.move(beside, mirror / beside.name)
    result = conformance(root, "--expected", tmp_path / "mirror")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("match ")


def test_api_selects_the_adapters_that_run(tmp_path):
    result = conformance("--api", "anthropic", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    statuses = {f["path"]: f["status"] for f in report["files"]}
    assert statuses["anthropic-messages/malformed-frame.sse"] == "match"
    assert statuses["cassettes/anthropic-tool-loop.yaml"] == "match"  # detected, then selected
    assert statuses["openai-chat/refusal.sse"] == "skipped"
    assert statuses["simulator/openai-chat-text.sse"] == "skipped"


def test_bad_inputs_give_clear_errors(tmp_path):
    missing = conformance(tmp_path / "nowhere")
    assert missing.returncode == 2
    assert f"{tmp_path / 'nowhere'}: no such directory of recordings" in missing.stderr

    (tmp_path / "empty").mkdir()
    empty = conformance(tmp_path / "empty")
    assert empty.returncode == 2 and "no recordings in it" in empty.stderr

    root = tmp_path / "bad"
    (root / "mystery").mkdir(parents=True)
    (root / "mystery" / "unknown-api.json").write_bytes(b'{"greeting": "hello"}')
    (root / "openai-chat").mkdir()
    (root / "openai-chat" / "proxy-page.sse").write_bytes(b"<html>502 Bad Gateway</html>")
    (root / "openai-chat" / "broken.sse").write_bytes(USER_CAPTURE)
    (root / "openai-chat" / f"broken.sse{EXPECTED_SUFFIX}").write_text('{"kind": "run.started"\n')
    (root / "openai-chat" / "not-utf8.sse").write_bytes(USER_CAPTURE)
    (root / "openai-chat" / f"not-utf8.sse{EXPECTED_SUFFIX}").write_bytes(b"\xff\xfe")
    result = conformance(root)
    assert result.returncode == 1
    lines = {line.split()[1]: line for line in result.stdout.splitlines()}
    assert lines["mystery/unknown-api.json"].startswith("error ")
    assert "cannot tell which provider API" in lines["mystery/unknown-api.json"]
    assert "put it under a folder named after its API" in lines["mystery/unknown-api.json"]
    assert "none of the framings" in lines["openai-chat/proxy-page.sse"]
    assert "broken.sse.expected.jsonl, line 1: not JSON" in lines["openai-chat/broken.sse"]
    assert "cannot read" in lines["openai-chat/not-utf8.sse"]
    assert "4 error" in result.stderr


@pytest.mark.corpus
def test_the_recorded_corpus_as_a_suite_of_its_own(tmp_path):
    # Another layout: provider folders (a family: the API is detected among its APIs), deeper
    # folders, expected files kept elsewhere. What --update writes, a second process matches.
    require_corpus()
    expected = tmp_path / "expected"
    first = conformance(CORPUS_DIR, "--expected", expected, "--update", "--json")
    report = json.loads(first.stdout)
    errors = [f for f in report["files"] if f["status"] == "error"]
    # The one file that is no provider output: a transcribed Standard Webhooks test vector.
    assert [f["path"] for f in errors] == ["openai/openai-python/webhook-test-vector.json"]
    assert "put it under a folder named after its API" in errors[0]["note"]
    assert report["counts"]["created"] > 100
    again = json.loads(conformance(CORPUS_DIR, "--expected", expected, "--json").stdout)
    assert again["counts"] == {"match": report["counts"]["created"], "error": 1}
    assert not any(CORPUS_DIR.rglob(f"*{EXPECTED_SUFFIX}")), "nothing is written into the corpus"
