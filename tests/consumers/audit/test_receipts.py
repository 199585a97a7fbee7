"""audit verify's receipts check (consumers/audit/receipts.py) and the export of receipts, without
a broker: archives written by the real AuditWriter, tool results built by the executor's own
event builder (services/run_logic/executor_events.py), receipts encoded by its own codec. The
same on the real broker with the real executor: tests/integration/audit/test_archive.py."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from modelevents.consumers.audit import export
from modelevents.consumers.audit.format import archive_files
from modelevents.consumers.audit.verify import verify_archive
from modelevents.consumers.audit.writer import AuditWriter
from modelevents.consumers.errors import AuditError
from modelevents.consumers.tools.receipts import ToolReceipt, encode_receipt
from modelevents.schemas import codec
from modelevents.schemas.events import (
    Envelope,
    EventSource,
    ModelEvent,
    RunAwaiting,
    RunFinished,
    RunStarted,
    ToolCall,
)
from modelevents.services.run_logic.executor_events import tool_result_event
from tests.consumers.audit.test_verify import write_archive

SOURCE = {"events_topic": "t.events", "frames_topic": None, "inputs_topic": "t.run-inputs",
          "receipts_topic": "t.receipts", "group": "g"}
OUTPUT = '{"city": "Paris", "temperature": 14.0}'


def _event(run_id: str, kind: str, payload, n: int, tenant: str = "default") -> ModelEvent:
    return ModelEvent(event_id=f"{run_id}-{n}", run_id=run_id, tenant=tenant, provider="openai",
                      api="openai-responses", model="gpt-test", kind=kind,
                      source=EventSource(frame_id=f"s0:{n}", index=0, transport="sse"),
                      received_at=1, adapter="openai_responses@4",
                      envelope=Envelope(content_type="application/json", body=b"{}"),
                      payload=payload, seq=n)


def _run(run_id: str, call_id: str = "c1", *, executed: bool = True, output: str = OUTPUT,
         outcome: str = "succeeded") -> list[ModelEvent]:
    """A run that asks for get_weather and finishes after its result: from the executor
    (``executed``), else from the application (its own tool.result on ingest)."""
    call = _event(run_id, "tool.call", ToolCall(0, "get_weather", call_id, '{"city": "Paris"}'), 1)
    if executed:
        result = tool_result_event(call, "get_weather", call_id, output, False, orjson.dumps(
            {"untrusted": True, "operation_id": "op_x", "outcome": outcome}),
            "application/vnd.modelevents.tool-output+json", 2)
    else:
        result = dataclasses.replace(_event(run_id, "tool.result", None, 3), payload=(
            tool_result_event(call, "get_weather", call_id, output, False, b"{}", "x", 2).payload))
    return [_event(run_id, "run.started", RunStarted(status="in_progress"), 0), call,
            dataclasses.replace(result, seq=2),
            _event(run_id, "run.awaiting", RunAwaiting("tool_results"), 3),
            _event(run_id, "run.finished", RunFinished("completed", "stop"), 4)]


def _receipts(run_id: str, call_id: str = "c1", *, result: str | None = OUTPUT,
              outcome: str = "succeeded", finished: bool = True, tool: str = "get_weather",
              tenant: str = "default") -> list[ToolReceipt]:
    started = ToolReceipt(operation_id="op_x", idempotency_key="k", run_id=run_id, tenant=tenant,
                          tool_name=tool, tool_call_id=call_id, schema_version="1", attempt=1,
                          phase="started", started_at=1)
    done = dataclasses.replace(started, phase="finished", finished_at=2, outcome=outcome,
                               postcondition="not_checked", result=result)
    return [started, done] if finished else [started]


def _records(events: list[ModelEvent], receipts: list[ToolReceipt]):
    return ([("t.events", 0, e.run_id.encode(), codec.encode(e)) for e in events]
            + [("t.receipts", 0, r.run_id.encode(), encode_receipt(r)) for r in receipts])


def _findings(root: Path):
    report = verify_archive(root)
    return (report, [(f.where, f.message) for f in report.problems if f.check == "receipts"],
            [(f.where, f.message) for f in report.notes if f.check == "receipts"])


def test_an_executed_run_with_its_receipts_verifies_and_an_application_answered_one_is_listed(
        tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x") + _run("run_app", "c9", executed=False),
                                 _receipts("run_x")), source=SOURCE)
    report, problems, notes = _findings(root)
    assert report.ok, report.problems
    assert problems == []
    assert notes == [("run run_app", "1 tool call(s) without a receipt: not executed by the tool "
                                     "executor (answered by the application, or not yet): c9")]
    assert report.summary()["receipts"] == 2
    # The manifests count the receipts of each block.
    lines = [json.loads(line) for m in archive_files(root)[1] for line in m.read_text().split()]
    assert sum(line.get("receipts", 0) for line in lines if line["type"] == "block") == 2


def test_a_result_without_its_receipt_fails_and_names_the_call(tmp_path: Path) -> None:
    root = tmp_path / "a"
    # Only the unfinished attempt: the final receipt is not in the archive.
    write_archive(root, _records(_run("run_x"), _receipts("run_x", finished=False)),
                  source=SOURCE)
    report, problems, _ = _findings(root)
    assert not report.ok
    assert problems == [("run run_x tool call c1", "a tool.result from the executor (seq 2) "
                         "without its receipt: no final receipt of this call is archived")]


def test_a_receipt_without_its_call_fails(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), _receipts("run_x") + _receipts("run_x", "c_ghost")),
                  source=SOURCE)
    report, problems, _ = _findings(root)
    assert [where for where, _ in problems] == ["run run_x tool call c_ghost"]
    assert "without its call" in problems[0][1]


def test_a_receipt_edited_with_its_block_and_manifest_disagrees_with_the_result(
        tmp_path: Path) -> None:
    # A tamperer who rewrites a block, its manifest and the checkpoints keeps the chain whole:
    # the receipt written so ("succeeded" turned into a failure) no longer says what the result
    # the model got says.
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), _receipts("run_x", result="no such city",
                                                            outcome="failed")), source=SOURCE)
    report, problems, _ = _findings(root)
    assert [where for where, _ in problems] == ["run run_x tool call c1"]
    assert problems[0][1].startswith("the receipt does not say what the tool.result (seq 2) says: "
                                     "receipt failed")


def test_a_receipt_that_cannot_be_decoded_is_archived_and_named(tmp_path: Path) -> None:
    root = tmp_path / "a"
    broken = encode_receipt(_receipts("run_x")[1])[:14]
    write_archive(root, _records(_run("run_x"), _receipts("run_x"))
                  + [("t.receipts", 1, b"run_x", broken)], source=SOURCE)
    report = verify_archive(root)
    assert [(f.check, f.where) for f in report.problems] == [("receipts", "t.receipts:1@0")]
    assert "a tool receipt that cannot be decoded" in report.problems[0].message
    # Nothing lost: the record is in the archive, under the tenant nobody could read.
    assert any("tenant=_unreadable" in str(p) for p in archive_files(root)[0])


def test_an_archive_without_receipts_lists_the_executors_results(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), []), source={**SOURCE, "receipts_topic": None})
    report, problems, notes = _findings(root)
    assert report.ok and problems == []
    assert notes == [("run run_x", "1 tool result(s) from the executor; receipts are not "
                                   "archived here (audit run --no-receipts)")]


def test_receipts_are_exported(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), _receipts("run_x")), source=SOURCE)
    out = io.StringIO()
    assert export.export_jsonl(root, out) == 7
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    receipts = [line for line in lines if line["type"] == "receipt"]
    assert [(r["record"]["phase"], r["record"]["outcome"]) for r in receipts] == [
        ("started", None), ("finished", "succeeded")]
    assert receipts[1]["record"]["result"] == OUTPUT and receipts[1]["topic"] == "t.receipts"
    path = tmp_path / "a.parquet"
    assert export.export_parquet(root, path) == 7
    assert pq.read_table(path).num_rows == 5
    table = pq.read_table(export.receipts_path(path)).to_pylist()
    assert export.receipts_path(path).name == "a.receipts.parquet"
    assert [(r["phase"], r["tool_call_id"], r["attempt"], r["result"]) for r in table] == [
        ("started", "c1", 1, None), ("finished", "c1", 1, OUTPUT)]


def test_the_executors_results_need_no_frame(tmp_path: Path) -> None:
    # An archive with frames: the run's provider events name frames that are not archived (each
    # is a failure), the executor's tool.result (transport executor) names none.
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), _receipts("run_x")),
                  source={**SOURCE, "frames_topic": "t.frames"})
    report = verify_archive(root)
    assert sorted(f.where for f in report.problems if f.check == "frames") == [
        f"run run_x seq {seq}" for seq in (0, 1, 3, 4)]


def test_an_archive_is_continued_only_with_the_topics_it_was_made_with(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write_archive(root, _records(_run("run_x"), []), source={**SOURCE, "receipts_topic": None})
    with pytest.raises(AuditError) as refused:
        AuditWriter(root, source=SOURCE)
    assert "receipts_topic None, not 't.receipts'" in str(refused.value)
    assert "--no-receipts" in str(refused.value)
    assert verify_archive(root).ok  # nothing of it was touched, and it is not left locked
    AuditWriter(root, source={**SOURCE, "receipts_topic": None}).close()
