"""A live eval: every task of a corpus run under each bundle, ``repeat`` times, through the real
gateway (``POST /v1/runs`` of ``bundle.render(task transcript)``), its outcome read from Kafka.

A run is settled when its state on ``runs`` is terminal, waits for an approval, or waits for
tools whose every call has its result (the tool executor answered; the eval does not continue
the loop: a task's expectation is about what the run did up to there). Each request is sent
exactly as ``bundle.render`` made it (the bundle's own model): a simulator started with the
corpus (``modelevents simulator --corpus``) knows each task by its conversation and answers the
scenario the task names for the API. ``on_simulator``: a task that names no scenario for the
bundle's API is not run, and says so. Then the evidence of the runs is read from ``events``,
``runs``, ``run-inputs`` and ``receipts``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from modelevents.schemas.bundles import Bundle
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.run_state import RunState
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.kafka.clients import read_records
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.eval.corpus import Corpus, Task
from modelevents.services.migration.eval.evidence import RunEvidence, eval_run_id
from modelevents.services.migration.eval.sources import EvidenceBook, ReceiptDecoder

TERMINAL = {"completed", "incomplete", "failed", "cancelled"}
EVIDENCE_TOPICS = ("events", "runs", "run-inputs", "receipts")

Progress = Callable[[str], None]


@dataclass
class LivePlan:
    corpus: Corpus
    bundles: list[Bundle]
    repeat: int = 1
    tenant: str | None = None
    on_simulator: bool = False
    timeout_s: float = 300.0
    api_key: str | None = None


@dataclass
class Started:
    runs: dict[str, str] = field(default_factory=dict)  # run id -> bundle id
    notes: list[str] = field(default_factory=list)
    not_started: dict[str, list[str]] = field(default_factory=dict)  # bundle id -> why


def request_for(bundle: Bundle, task: Task, run_id: str, plan: LivePlan) -> dict[str, Any]:
    """The body of ``POST /v1/runs`` that runs ``task`` under ``bundle``."""
    extra: dict[str, Any] = {"run_id": run_id, "stream": True, "background": task.background}
    if plan.tenant:
        extra["tenant"] = plan.tenant
    request: NeutralRequest = bundle.render(task.transcript, **extra)
    update: dict[str, Any] = {}
    if task.structured_output is not None and request.structured_output is None:
        update["structured_output"] = task.structured_output
    if update:
        request = request.model_copy(update=update)
    body: dict[str, Any] = orjson.loads(request.model_dump_json(by_alias=True,
                                                                 exclude_none=True))
    return body


def settled(state: RunState) -> bool:
    if state.status in TERMINAL or state.status == "waiting_for_approval":
        return True
    return state.status == "waiting_for_tool" and not state.open_tool_calls


def _problem(response: httpx.Response) -> str:
    """The gateway's answer in one line: its status and the problem's detail."""
    try:
        detail = str(response.json().get("detail") or response.text)
    except ValueError:
        detail = response.text
    return f"{response.status_code} {' '.join(detail.split())[:400]}"


def start_runs(gateway_url: str, plan: LivePlan, progress: Progress) -> Started:
    started = Started()
    headers = {"authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
    nonce = secrets.token_hex(4)
    with httpx.Client(base_url=gateway_url, timeout=60, headers=headers) as client:
        for bundle in plan.bundles:
            api = bundle.target.api
            for task in plan.corpus.tasks:
                if plan.on_simulator and api not in task.simulator:
                    started.notes.append(f"task {task.id} not run under {bundle.name}: it names "
                                         f"no simulator scenario for {api}")
                    continue
                for repeat in range(plan.repeat):
                    run_id = eval_run_id(task.id, repeat, f"{nonce}{bundle.bundle_id[4:10]}")
                    try:
                        response = client.post("/v1/runs",
                                               json=request_for(bundle, task, run_id, plan))
                    except httpx.HTTPError as exc:
                        raise ConfigError(f"the gateway at {gateway_url} cannot be reached "
                                          f"({exc}); start it with `modelevents gateway`"
                                          ) from exc
                    if response.status_code != 202:
                        why = _problem(response)
                        started.not_started.setdefault(bundle.bundle_id, []).append(
                            f"{task.id} (repeat {repeat}): {why}")
                        progress(f"{run_id} ({bundle.name}) not started: {why}")
                        continue
                    started.runs[run_id] = bundle.bundle_id
            progress(f"{bundle.name}: {sum(b == bundle.bundle_id for b in started.runs.values())}"
                     f" runs started")
    return started


async def wait_settled(settings: PipelineSettings, run_ids: set[str], timeout_s: float,
                       progress: Progress) -> set[str]:
    """Follow ``runs`` until every run settled or ``timeout_s`` passed; the runs not settled."""
    deadline = time.monotonic() + timeout_s
    waiting = set(run_ids)
    last_said = 0.0
    async for rec in read_records(settings, "runs", timeout=timeout_s, idle_tick=1.0):
        if rec is not None and isinstance(rec.value, RunState) and rec.value.run_id in waiting:
            if settled(rec.value):
                waiting.discard(rec.value.run_id)
        now = time.monotonic()
        if not waiting or now > deadline:
            break
        if now - last_said > 5:
            progress(f"{len(run_ids) - len(waiting)}/{len(run_ids)} runs settled")
            last_said = now
    return waiting


async def read_evidence(settings: PipelineSettings, run_ids: set[str],
                        decode_receipt: ReceiptDecoder) -> list[RunEvidence]:
    """The evidence of ``run_ids`` on the four topics, as they hold it now."""
    book = EvidenceBook(decode_receipt, wanted=run_ids.__contains__)
    for topic in EVIDENCE_TOPICS:
        async for rec in read_records(settings, topic, timeout=5.0, to_end=True):
            if rec is not None:
                book.feed(rec.raw)
    return book.runs()
