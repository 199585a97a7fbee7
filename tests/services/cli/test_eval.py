"""``modelevents eval run --from-archive``: recorded runs re-scored from an audit archive with no
connection to anything (no provider, no broker), the same verdicts as scoring them in memory;
``--bundle`` files are read and checked."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from modelevents.services.cli.main import main
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, load_corpus
from modelevents.services.migration.eval.evidence import digest
from modelevents.services.migration.eval.prices import load_prices
from modelevents.services.migration.eval.result import build_result
from modelevents.services.migration.eval.scoring import score_runs
from tests.services.migration.eval.runs import bundle, receipt, runs_for, write_archive

CORPUS = load_corpus("example")
TOOLS = list({t.name: t for task in CORPUS.tasks for t in task.tools}.values())
A = bundle("responses", "openai", "openai-responses", "gpt-5-mini", TOOLS)
B = bundle("chat", "openai", "openai-chat", "gpt-4o-mini", TOOLS)
PRICES = EXAMPLE_CORPUS / "prices.example.yaml"


def _runs():
    runs = runs_for(CORPUS, A) + runs_for(CORPUS, B)
    for run in runs:
        if run.run_id.startswith("eval.uncertain-side-effect."):
            call_id = digest(run).tool_calls[0][1]
            run.receipts = [receipt(run.run_id, call_id, "add_note", "unknown",
                                    op=f"op-{run.run_id}", postcondition=None, cost=0.002)]
    return runs


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"a frozen eval opened a connection: {args}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def _bundle_file(tmp_path: Path, b) -> str:
    path = tmp_path / f"{b.name}.json"
    path.write_text(b.model_dump_json(by_alias=True))
    return str(path)


def test_a_frozen_eval_rescores_an_archive_without_any_connection(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_network: None):
    runs = _runs()
    archive = write_archive(tmp_path / "archive", runs)
    code = main(["eval", "run", "--corpus", "example", "--from-archive", str(archive),
                 "--bundle", _bundle_file(tmp_path, A), "--bundle", _bundle_file(tmp_path, B),
                 "--prices", str(PRICES), "--no-publish", "--json",
                 "--out", str(tmp_path / "result.json")])
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads((tmp_path / "result.json").read_text())
    assert record["mode"] == "frozen" and record["corpus"] == "example@1"
    grouped, _ = score_runs(CORPUS, _runs(), {A.bundle_id: A, B.bundle_id: B},
                            load_prices(PRICES), only=[A.bundle_id, B.bundle_id])
    expected = build_result("example@1", "frozen", grouped, {A.bundle_id: "responses",
                                                             B.bundle_id: "chat"})
    assert record["runs"] == expected["runs"]
    assert record["bundles"] == expected["bundles"]
    a, b = record["bundles"]
    assert (a["name"], a["rejected"], b["name"], b["rejected"]) == ("responses", 0, "chat", 1)
    assert b["gate_failures"] == {"invalid_schema": 1}
    assert a["model_snapshots"] == ["gpt-5-mini-2025-08-07"]
    assert all((f["rejected_a"], f["rejected_b"]) == (0, 1)
               for f in record["comparisons"][0]["figures"])


def test_a_frozen_eval_without_bundles_groups_the_runs_by_the_bundle_they_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_network: None):
    archive = write_archive(tmp_path / "archive", _runs())
    assert main(["eval", "run", "--corpus", "example", "--from-archive", str(archive),
                 "--no-publish", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {b["bundle"] for b in record["bundles"]} == {A.bundle_id, B.bundle_id}


def test_a_bundle_file_that_is_not_a_bundle_is_refused_by_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "b.yaml"
    path.write_text("name: x\ntarget: {provider: openai}\n")
    assert main(["eval", "run", "--corpus", "example", "--bundle", str(path)]) == 2
    err = capsys.readouterr().err
    assert "does not fit" in err and "target.api: Field required" in err


def test_a_live_eval_without_a_bundle_says_what_it_needs(capsys: pytest.CaptureFixture[str]):
    assert main(["eval", "run", "--corpus", "example"]) == 2
    assert "needs --bundle ID|FILE" in capsys.readouterr().err
