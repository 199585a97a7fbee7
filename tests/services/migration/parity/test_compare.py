"""Two revisions of the adapters over the same recorded frames: noise 0, real differences found.

The runs are every project fixture and, when it is beside the checkout, every recording of the
provider corpus, cut into frames as the feeder cuts them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.schemas.events import payload_dict
from modelevents.services.migration.parity.compare import ParityDiff, compare_run
from modelevents.services.migration.parity.revision import AdapterRevision, load_revision
from modelevents.services.run_logic.renormalize import renormalize
from tests.corpus import require_corpus
from tests.paths import FIXTURES
from tests.services.migration.parity.recorded import (
    BEFORE_CHAT_FIXES,
    CHAT_FIXES,
    adapters_copy,
    corpus_paths,
    edit,
    fixture_paths,
    fixture_runs,
    recorded_runs,
    run_id_of,
)

FIXTURE_RUNS = fixture_runs()


def parity(baseline: AdapterRevision, candidate: AdapterRevision,
           runs: dict[str, list]) -> ParityDiff:
    diff = ParityDiff(baseline, candidate)
    for run_id, frames in sorted(runs.items()):
        diff.add(compare_run(run_id, frames, baseline, candidate))
    return diff


def assert_no_noise(diff: ParityDiff, runs: dict[str, list]) -> None:
    assert [r.run_id for r in diff.runs if r.verdict != "equal"] == []
    totals = diff.totals()
    assert (totals.added, totals.removed, totals.changed) == (0, 0, 0)
    assert totals.baseline == totals.candidate > len(runs)
    assert all(s.runs_differing == 0 for s in diff.per_api.values())


def test_every_fixture_is_a_run_of_frames() -> None:
    assert len(FIXTURE_RUNS) == len(fixture_paths())
    assert len({f.api for frames in FIXTURE_RUNS.values() for f in frames if f.api}) == 5


def test_old_against_old_noise_is_zero(tmp_path: Path) -> None:
    installed = load_revision("installed")
    # The same code loaded a second time under a private name: nothing but the loading differs.
    copy = load_revision(str(adapters_copy(tmp_path)))
    assert copy.package != installed.package
    assert_no_noise(parity(installed, copy, FIXTURE_RUNS), FIXTURE_RUNS)
    assert_no_noise(parity(installed, installed, FIXTURE_RUNS), FIXTURE_RUNS)
    # An older revision against itself: noise 0 whatever the revision.
    before = load_revision(BEFORE_CHAT_FIXES)
    assert_no_noise(parity(before, before, FIXTURE_RUNS), FIXTURE_RUNS)


@pytest.mark.corpus
def test_old_against_old_noise_is_zero_on_the_recorded_corpus(tmp_path: Path) -> None:
    require_corpus()
    runs = recorded_runs(corpus_paths())
    assert len(runs) > 50
    installed = load_revision("installed")
    assert_no_noise(parity(installed, load_revision(str(adapters_copy(tmp_path))), runs), runs)


def test_the_revision_before_the_chat_fixes_differs_exactly_on_their_recordings() -> None:
    diff = parity(load_revision("installed"), load_revision(BEFORE_CHAT_FIXES), FIXTURE_RUNS)

    differing = {r.run_id for r in diff.runs if r.verdict == "differs"}
    assert differing == {run_id_of(FIXTURES / "openai-chat" / name) for name in CHAT_FIXES}
    assert {api: s.runs_differing for api, s in diff.per_api.items()} == {
        "openai-responses": 0, "openai-chat": len(CHAT_FIXES), "anthropic-messages": 0,
        "gemini-generate": 0, "gemini-interactions": 0}
    assert diff.per_api["openai-chat"].runs == sum(
        1 for frames in FIXTURE_RUNS.values() if any(f.api == "openai-chat" for f in frames))
    for r in diff.runs:
        assert r.verdict == "equal" or set(r.per_api) == {"openai-chat"}, r.run_id

    # A call header resent under another index: one whole call now; before, three calls under
    # the same id, each with a piece of the arguments (invalid JSON).
    header = next(r for r in diff.runs if r.run_id.endswith("tool-call-header-repeated.sse"))
    assert header.first_diff is not None and header.first_diff_api == "openai-chat"
    calls = {spec: [payload_dict(e.payload) for e in _events(header.run_id, spec)
                    if e.kind == "tool.call"] for spec in ("installed", BEFORE_CHAT_FIXES)}
    assert [c["arguments_valid"] for c in calls["installed"]] == [True]
    assert [c["arguments_valid"] for c in calls[BEFORE_CHAT_FIXES]] == [False, False, False]
    assert header.counts.added + header.counts.changed > 0
    assert header.counts.baseline == len(_events(header.run_id, "installed"))
    assert header.counts.candidate == len(_events(header.run_id, BEFORE_CHAT_FIXES))


def _events(run_id: str, spec: str) -> list:
    return renormalize(FIXTURE_RUNS[run_id], run_id, load_revision(spec).normalizer).events


def test_one_deliberate_change_is_found_where_it_matters_and_nowhere_else(tmp_path: Path) -> None:
    checkout = adapters_copy(tmp_path)
    # Chat's finish_reason "length" read as a content filter instead of the token limit.
    edit(checkout / "adapters" / "openai_chat.py", '"length": ("incomplete", "max_tokens"),',
         '"length": ("incomplete", "content_filter"),')
    diff = parity(load_revision("installed"), load_revision(str(checkout)), FIXTURE_RUNS)

    # The chat recordings that end a choice on "length", and only they.
    with_length = {run_id_of(p) for p in (FIXTURES / "openai-chat").iterdir()
                   if '"finish_reason":"length"' in p.read_text().replace(" ", "")}
    assert with_length
    assert {r.run_id for r in diff.runs if r.verdict == "differs"} == with_length
    for r in diff.runs:
        if r.run_id not in with_length:
            continue
        d = r.first_diff
        assert d is not None and d.fields == ("payload",)
        assert d.baseline is not None and d.candidate is not None
        assert d.baseline.event_id == d.candidate.event_id
        assert payload_dict(d.baseline.payload)["reason"] == "max_tokens"
        assert payload_dict(d.candidate.payload)["reason"] == "content_filter"
        assert (r.counts.added, r.counts.removed) == (0, 0) and r.counts.changed >= 1


def test_a_frame_only_one_revision_dead_letters_is_a_difference(tmp_path: Path) -> None:
    checkout = adapters_copy(tmp_path)
    # A bug outside what the adapter guards: its feed raises on the third frame of a stream.
    edit(checkout / "adapters" / "base.py", "        frame_id = frame.frame_id\n",
         "        frame_id = frame.frame_id\n"
         "        if frame_id.endswith(':2'):\n"
         "            raise RuntimeError('deliberate')\n")
    run_id = run_id_of(FIXTURES / "openai-chat" / "refusal.sse")
    r = compare_run(run_id, FIXTURE_RUNS[run_id], load_revision("installed"),
                    load_revision(str(checkout)))
    assert r.verdict == "differs" and r.dead_letters_baseline == []
    assert any("RuntimeError('deliberate')" in note for note in r.dead_letters_candidate)


def test_the_same_dead_letter_under_another_revision_number_is_no_difference(
        tmp_path: Path) -> None:
    def raising(root: Path, revision: str) -> AdapterRevision:
        checkout = adapters_copy(root)
        edit(checkout / "adapters" / "base.py", "        frame_id = frame.frame_id\n",
             "        frame_id = frame.frame_id\n"
             "        if frame_id.endswith(':2'):\n"
             "            raise RuntimeError('deliberate')\n")
        edit(checkout / "adapters" / "openai_chat.py", 'revision = "4"',
             f'revision = "{revision}"')
        return load_revision(str(checkout))

    old, new = raising(tmp_path / "a", "4"), raising(tmp_path / "b", "5")
    run_id = run_id_of(FIXTURES / "openai-chat" / "refusal.sse")
    r = compare_run(run_id, FIXTURE_RUNS[run_id], old, new)
    assert r.verdict == "equal", (r.dead_letters_baseline, r.dead_letters_candidate)
    assert old.revisions()["openai-chat"] != new.revisions()["openai-chat"]
