"""`modelevents eval parity --from-archive`: an audit archive of recorded frames (and the events
published for them), re-normalized by a candidate revision of the adapters, as a user runs it.

The archive is written by the audit archive's own writer, as `modelevents audit run
--with-frames` writes it; the frames are every project fixture cut as the feeder cuts them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.consumers.audit.writer import AuditWriter
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import is_end_of_input
from modelevents.services.cli import main
from modelevents.services.run_logic.renormalize import renormalize
from tests.paths import FIXTURES
from tests.services.migration.parity.recorded import (
    BEFORE_CHAT_FIXES,
    CHAT_FIX_RUNS,
    CHAT_FIXES,
    adapters_copy,
    fixture_runs,
    json_lines,
    run_id_of,
)

FRAMES, EVENTS = "modelevents.frames", "modelevents.events"
RUNS = fixture_runs()


def write_archive(root: Path, *, frames: bool = True, events: bool = True) -> Path:
    """Every fixture run's frames and the events the installed adapters publish for them."""
    offsets = {FRAMES: 0, EVENTS: 0}
    writer = AuditWriter(root, source={"frames_topic": FRAMES})
    try:
        for n, (run_id, run_frames) in enumerate(sorted(RUNS.items())):
            stamp = 1_700_000_000_000 + n * 1000
            records = []
            if frames:
                records += [(FRAMES, codec.encode(f)) for f in run_frames]
            if events:
                records += [(EVENTS, codec.encode(e))
                            for e in renormalize(run_frames, run_id).events]
            for topic, value in records:
                writer.add(topic, 0, offsets[topic], stamp, run_id.encode(), value)
                offsets[topic] += 1
    finally:
        writer.close()
    return root


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_archive(tmp_path_factory.mktemp("archive"))


def eval_parity(*args: str) -> int:
    return main(["eval", "parity", *args])


def test_a_candidate_before_a_fix_is_reported_per_run_and_per_api(
        archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_parity("--adapters", BEFORE_CHAT_FIXES, "--from-archive", str(archive),
                       "--json") == 1
    lines = json_lines(capsys.readouterr().out)
    runs = [line for line in lines if "run_id" in line]
    apis = {line["api"]: line for line in lines if "api" in line and "run_id" not in line}
    summary = lines[-1]["summary"]

    assert {r["run_id"] for r in runs} == CHAT_FIX_RUNS
    assert all(r["verdict"] == "differs" and r["first_diff"]["api"] == "openai-chat"
               for r in runs)
    header = next(r for r in runs if r["run_id"].endswith("tool-call-header-repeated.sse"))
    first = header["first_diff"]
    assert first["baseline"]["kind"] == "tool.call.delta"
    assert first["candidate"]["kind"] == "tool.call.started"
    assert first["seq"] == 4 and set(first["fields"]) == {"kind", "payload"}
    assert apis["openai-chat"]["runs_differing"] == len(CHAT_FIXES)
    assert all(a["runs_differing"] == 0 for name, a in apis.items() if name != "openai-chat")
    assert summary["runs"] == len(RUNS) and summary["differs"] == len(CHAT_FIXES)
    assert summary["ok"] is False and summary["unreadable"] == 0
    assert summary["added"] == sum(r["added"] for r in runs)
    assert summary["candidate"]["adapters"]["openai-chat"] == "openai_chat@3"
    assert summary["baseline"]["adapters"]["openai-chat"] == "openai_chat@4"
    assert summary["baseline"]["revision"] == "installed"


def test_old_against_old_is_zero_and_says_so(archive: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    checkout = adapters_copy(tmp_path)
    assert eval_parity("--adapters", str(checkout), "--from-archive", str(archive)) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-3] == (
        f"parity: {len(RUNS)} runs ({_frames()} frames): "
        f"{len(RUNS)} equal, 0 differ; {_events()} → {_events()} events, 0 added, 0 removed, "
        "0 changed")
    assert f"candidate {checkout / 'adapters'}:" in out
    # The same revision as both sides, named twice.
    assert eval_parity("--adapters", BEFORE_CHAT_FIXES, "--baseline", BEFORE_CHAT_FIXES,
                       "--from-archive", str(archive)) == 0


def _frames() -> int:
    return sum(1 for frames in RUNS.values() for f in frames if not is_end_of_input(f))


def _events() -> int:
    return sum(len(renormalize(frames, run_id).events) for run_id, frames in RUNS.items())


def test_against_the_published_events(archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_parity("--adapters", "installed", "--against", "published",
                       "--from-archive", str(archive), "--json") == 0
    assert json_lines(capsys.readouterr().out)[-1]["summary"]["equal"] == len(RUNS)

    assert eval_parity("--adapters", BEFORE_CHAT_FIXES, "--against", "both",
                       "--from-archive", str(archive), "--json") == 1
    lines = json_lines(capsys.readouterr().out)
    summaries = [line["summary"] for line in lines if "summary" in line]
    assert [s["differs"] for s in summaries] == [len(CHAT_FIXES), len(CHAT_FIXES)]
    published = [line for line in lines if "published_adapters" in line]
    assert {line["run_id"] for line in published} == CHAT_FIX_RUNS
    assert all(line["published_adapters"] == ["openai_chat@4"]
               and line["current_adapters"] == ["openai_chat@3"] for line in published)


def test_one_run(archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = run_id_of(FIXTURES / "openai-chat" / "finish-repeated-new-id.sse")
    assert eval_parity("--adapters", BEFORE_CHAT_FIXES, "--from-archive", str(archive),
                       "--run-id", run_id) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"differs  {run_id}  ")
    assert "parity: 1 runs" in out


@pytest.mark.parametrize("args, message", [
    (["--adapters", "installed", "--from-archive", "/nonexistent/archive"],
     "--from-archive /nonexistent/archive: no such directory"),
    (["--adapters", "/nonexistent/checkout", "--from-archive", "ARCHIVE"],
     "--adapters /nonexistent/checkout: no such directory"),
    (["--adapters", "git:no-such-rev", "--from-archive", "ARCHIVE"], "git rev-parse"),
    (["--adapters", "installed", "--from-archive", "ARCHIVE", "--run-id", "run-nope"],
     "no run run-nope"),
])
def test_bad_input_is_exit_2_with_what_to_do(archive: Path, args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_parity(*[str(archive) if a == "ARCHIVE" else a for a in args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_an_archive_without_frames_is_exit_2(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    events_only = write_archive(tmp_path / "events-only", frames=False)
    assert eval_parity("--adapters", "installed", "--from-archive", str(events_only)) == 2
    assert "holds no frames (archive them with modelevents audit run --with-frames)" in (
        capsys.readouterr().err)
