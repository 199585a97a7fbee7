"""``audit verify``'s receipts check: what the tool executor did is proven by its receipts.

Two calls from ``verify.py``, kept here so that the decode path there stays the events':

    take_receipt(report, value, where, tenant)     # in the record loop: True when it took it
    check_receipts(report, events, archived)       # after the runs check

**Which tool results the executor wrote.** The executor answers a ``tool.call`` with a
``tool.result`` built by ``services/run_logic/executor_events.py``: its ``adapter`` is
:data:`~modelevents.services.run_logic.executor_events.ADAPTER`
(``modelevents-tool-executor/1``; transport ``executor``), and before it sends one it writes the
call's final ``finished`` receipt (``consumers/tools/executor.py``: ``_finish``). A result with
another adapter came from the provider's stream or from an application that answered the call
itself (``ingest``, or the next call's transcript).

More on this module: docs/audit.md, ``consumers/audit/receipts.py``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from modelevents.consumers.tools.receipts import ToolReceipt, decode_receipt, is_receipt
from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent, ToolCall, ToolResult
from modelevents.schemas.pieces import join_pieces
from modelevents.services.run_logic.executor_events import ADAPTER
from modelevents.services.run_logic.executor_events import TRANSPORT as EXECUTOR

__all__ = ["take_receipt", "check_receipts", "RECEIPTS"]

RECEIPTS = "receipts"  # the check's name in findings


class _Report(Protocol):
    receipts: dict[str, list[ToolReceipt]]

    def fail(self, check: str, where: str, message: str) -> None: ...

    def note(self, check: str, where: str, message: str) -> None: ...


def take_receipt(report: _Report, value: bytes, where: str, tenant: str) -> bool:
    """Whether ``value`` is a ToolReceipt; one is checked for its tenant and kept on ``report``
    (one that cannot be decoded is a failure)."""
    if not is_receipt(value):
        return False
    try:
        receipt = decode_receipt(value)
    except Exception as exc:  # fastavro raises bare exceptions of many types on corrupt bodies
        report.fail(RECEIPTS, where, f"a tool receipt that cannot be decoded: {exc}")
        return True
    if receipt.tenant != tenant:
        report.fail(RECEIPTS, f"run {receipt.run_id} ({where})", f"a receipt of tenant "
                    f"{receipt.tenant!r} under tenant {tenant!r}")
    report.receipts.setdefault(receipt.run_id, []).append(receipt)
    return True


@dataclass(frozen=True, slots=True)
class _Tool:
    """A tool.call or tool.result of the run, as far as the receipts check needs it."""

    kind: str
    seq: int
    tool_name: str
    tool_call_id: str
    output: str | None  # a tool.result's
    is_error: bool
    executed: bool  # a tool.result the executor wrote
    outcome: str | None  # the outcome its envelope names (an executed result's)


def _field(payload: Any, name: str) -> Any:
    # The projection's (branch name, dict), or the dataclass of an older schema's decode.
    return payload[1][name] if isinstance(payload, tuple) else getattr(payload, name)


def _tool_events(by_seq: dict[int, list[Any]]) -> list[_Tool]:
    """The run's tool.call and tool.result events (the first copy of each seq: verify's runs
    check reports copies that differ), from the payloads verify read; an event in pieces and the
    executor's results (whose envelope names the outcome) are decoded."""
    out: list[_Tool] = []
    for seq in sorted(by_seq):
        first = by_seq[seq][0]
        if first.tool is None or (first.piece is not None and first.piece[0] != 0):
            continue
        executed = first.kind == "tool.result" and first.transport == EXECUTOR
        if first.piece is None and not executed:
            payload = first.tool
            out.append(_Tool(first.kind, seq, _field(payload, "tool_name"),
                             _field(payload, "tool_call_id"),
                             _field(payload, "output") if first.kind == "tool.result" else None,
                             first.kind == "tool.result" and _field(payload, "is_error"),
                             False, None))
            continue
        try:
            decoded = [codec.decode(by_seq[seq + k][0].value)
                       for k in range(1 if first.piece is None else first.piece[1])]
            pieces = [e for e in decoded if isinstance(e, ModelEvent)]
            event = pieces[0] if first.piece is None else join_pieces(pieces)
        except Exception:  # the runs and records checks name what is wrong
            continue
        payload = event.payload
        if isinstance(payload, ToolCall):
            out.append(_Tool(event.kind, seq, payload.tool_name, payload.tool_call_id, None,
                             False, False, None))
        elif isinstance(payload, ToolResult):
            out.append(_Tool(event.kind, seq, payload.tool_name, payload.tool_call_id,
                             payload.output, payload.is_error, event.adapter == ADAPTER,
                             _outcome_of(event)))
    return out


def _outcome_of(result: ModelEvent) -> str | None:
    try:
        about = orjson.loads(result.envelope.body)
    except orjson.JSONDecodeError:
        return None
    return about.get("outcome") if isinstance(about, dict) else None


def check_receipts(report: _Report, events: dict[str, dict[int, list[Any]]],
                   tenants: dict[str, str], archived: bool) -> None:
    """The rules of the module docstring. ``events``: run id → seq → the archived events (each
    with ``value``, ``kind`` and ``piece``); ``tenants``: run id → its events' tenant;
    ``archived``: whether the archive holds receipts."""
    receipts = report.receipts
    for run_id in sorted(events):
        tools = _tool_events(events[run_id])
        if not tools and run_id not in receipts:
            continue
        run = f"run {run_id}"
        results = [e for e in tools if e.kind == "tool.result"]
        if not archived:
            _note_unarchived(report, run, results)
            continue
        calls = {e.tool_call_id: e for e in tools if e.kind == "tool.call"}
        of_call: dict[str, list[ToolReceipt]] = defaultdict(list)
        for receipt in receipts.get(run_id, []):
            of_call[receipt.tool_call_id].append(receipt)
        _check_results(report, run, results, of_call)
        for call_id, attempts in sorted(of_call.items()):
            _check_attempts(report, f"{run} tool call {call_id}", calls.get(call_id), attempts)
        _check_tenant(report, run, receipts.get(run_id, []), tenants.get(run_id))
        _note_unserved(report, run, sorted(set(calls) - set(of_call)))
    for run_id in sorted(set(receipts) - set(events)):
        report.note(RECEIPTS, f"run {run_id}", f"{len(receipts[run_id])} receipt(s), but none of "
                    "the run's events is in this archive")


def _note_unarchived(report: _Report, run: str, results: list[_Tool]) -> None:
    """An archive without receipts: the executor's results are listed, a note."""
    executed = sum(1 for e in results if e.executed)
    if executed:
        report.note(RECEIPTS, run, f"{executed} tool result(s) from the executor; "
                    "receipts are not archived here (audit run --no-receipts)")


def _check_results(report: _Report, run: str, results: list[_Tool],
                   of_call: dict[str, list[ToolReceipt]]) -> None:
    """Every tool.result the executor wrote has its call's final receipt, which says what the
    result says."""
    for result in results:
        if not result.executed:
            continue
        where = f"{run} tool call {result.tool_call_id}"
        final = [r for r in of_call.get(result.tool_call_id, [])
                 if r.phase == "finished" and r.result is not None]
        if not final:
            report.fail(RECEIPTS, where, f"a tool.result from the executor (seq "
                        f"{result.seq}) without its receipt: no final receipt of this call "
                        "is archived")
        elif not any(_says(receipt, result) for receipt in final):
            got = final[-1]
            report.fail(RECEIPTS, where, f"the receipt does not say what the tool.result "
                        f"(seq {result.seq}) says: receipt {got.outcome}, "
                        f"{'error' if got.result_is_error else 'output'} "
                        f"{_preview(got.result)}; result {result.outcome}, "
                        f"{'error' if result.is_error else 'output'} "
                        f"{_preview(result.output)}")


def _says(receipt: ToolReceipt, result: _Tool) -> bool:
    """Whether a final receipt says what an executed tool.result says."""
    return (receipt.result == result.output and receipt.result_is_error == result.is_error
            and (result.outcome is None or receipt.outcome == result.outcome))


def _check_attempts(report: _Report, where: str, call: _Tool | None,
                    attempts: list[ToolReceipt]) -> None:
    """The receipts of one tool call id: a finished attempt names an archived tool.call of the
    same tool (the first that does not, a failure); attempts started and never finished, a
    note."""
    for receipt in attempts:
        if receipt.phase != "finished":
            continue
        if call is None:
            report.fail(RECEIPTS, where, f"a receipt of attempt {receipt.attempt} "
                        f"({receipt.tool_name}, {receipt.outcome}) without its call: no "
                        "tool.call of this id is archived for the run")
            break
        if call.tool_name != receipt.tool_name:
            report.fail(RECEIPTS, where, f"a receipt of {receipt.tool_name!r} for a "
                        f"tool.call of {call.tool_name!r}")
            break
    finished = {r.attempt for r in attempts if r.phase == "finished"}
    unfinished = sorted({r.attempt for r in attempts if r.phase == "started"} - finished)
    if unfinished and not any(r.result is not None for r in attempts):
        report.note(RECEIPTS, where, f"attempt {', '.join(map(str, unfinished))} "
                    "started and never finished (the executor stopped mid-call; the "
                    "next one reconciles it)")


def _check_tenant(report: _Report, run: str, receipts: list[ToolReceipt],
                  tenant: str | None) -> None:
    """The run's receipts are of its tenant (the first that is not, a failure)."""
    for receipt in receipts:
        if receipt.tenant != tenant:
            report.fail(RECEIPTS, f"{run} tool call {receipt.tool_call_id}", f"a receipt "
                        f"of tenant {receipt.tenant!r} for a run of another tenant")
            break


def _note_unserved(report: _Report, run: str, unserved: list[str]) -> None:
    """Tool calls without any receipt (answered by the application, or not yet), a note."""
    if unserved:
        report.note(RECEIPTS, run, f"{len(unserved)} tool call(s) without a receipt: not "
                    "executed by the tool executor (answered by the application, or not "
                    f"yet): {', '.join(unserved[:20])}"
                    + (f" … ({len(unserved) - 20} more)" if len(unserved) > 20 else ""))


def _preview(text: str | None, limit: int = 60) -> str:
    if text is None:
        return "none"
    return repr(text if len(text) <= limit else text[:limit] + "…")
