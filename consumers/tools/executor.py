"""The tool executor: reads the model's proposals (``tool.call`` on ``events``), asks the policy,
runs the application's tool, records every attempt on ``receipts`` and answers the model with a
``tool.result`` on ``ingest``.

One call, in order::

    receipt of this operation already final?  → send its result again (same event id: deduped)
    unknown tool / arguments over their limits (arguments.py) or elided and not rebuilt /
        arguments break the schema  → error result
    policy: deny → error result with the reason; approve → awaiting receipt, approval.requested
            under a fresh approval id bound to the arguments' hash; wait for approval.resolved
            of that tenant, run and approval (granted: the policy is asked again, then go on;
            denied: error result); the same call id proposed with other arguments meanwhile
            → error result, nothing runs
    earlier attempt started and never finished, or finished unknown → reconcile hook first;
        a write without one ends unknown, never run again
    attempt: receipt "started" (acknowledged) → the tool, under its timeout → receipt "finished"
        retryable error → back off, next attempt (up to the contract's max_attempts)
        unknown outcome (a write timed out, the tool said so) → reconcile; nothing found → retry
        output over its schema → failed (drift); postcondition → confirmed | violated
    final receipt (with the result) → tool.result on ingest
    any exception on the way → that call's final receipt (_broken), the executor goes on

Provider-hosted tools (``hosted.call``) are never read, let alone executed: they are not
``tool.call`` events. A redelivered, replayed or re-proposed call (the same run and tool call id)
finds its receipts and never runs twice.

    executor = Executor(registry, policy, settings, gateway_url="http://127.0.0.1:8080")
    await executor.run()        # until cancelled
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from modelevents.consumers.client import subscribe
from modelevents.consumers.tools.approval_book import (
    AWAITING,
    HELD_CALL_BYTES,
    Answered,
    ApprovalBook,
    EarlyDecision,
    Waiting,
    held_call,
)
from modelevents.consumers.tools.arguments import ArgumentsRefused, parse_arguments
from modelevents.consumers.tools.continuation import Continuation
from modelevents.consumers.tools.contract import Earlier, ToolContract, ToolError, ToolOutcome
from modelevents.consumers.tools.dispatch import DEFAULT_MAX_CONCURRENT, Lanes
from modelevents.consumers.tools.elided_arguments import rebuilt_arguments
from modelevents.consumers.tools.output import (
    ENVELOPE_TYPE,
    cut_text,
    shape_error,
    shape_output,
)
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.receipts import (
    ToolReceipt,
    decode_receipt,
    encode_receipt,
    now_ms,
)
from modelevents.consumers.tools.registry import ToolRegistry
from modelevents.consumers.tools.results import (
    GRANTED,
    HASH_FIELD,
    approval_event,
    arguments_hash,
    decides_executor_approvals,
    decision_hash,
    executor_event,
    new_approval_id,
    tool_result_event,
)
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.schemas.events import Approval, ModelEvent, ToolCall, ToolResult
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["Executor", "CallContext", "operation_id", "KINDS"]

log = logging.getLogger(__name__)

KINDS = frozenset({"tool.call", "approval.resolved", "tool.result"})


def operation_id(run_id: str, tool_call_id: str) -> str:
    return "op_" + hashlib.sha256(f"{run_id}\x00{tool_call_id}".encode()).hexdigest()[:32]


def message_of(exc: BaseException) -> str:
    """An exception's message, capped, even when reading it raises."""
    try:
        return cut_text(str(exc))
    except Exception:
        return f"<the message of a {type(exc).__name__} could not be read>"


def described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {message_of(exc)}"


@dataclass(frozen=True)
class CallContext:
    """What a tool is told about the call it runs."""

    operation_id: str
    idempotency_key: str
    attempt: int
    tenant: str
    run_id: str
    tool_call_id: str


@dataclass
class _Call:
    event: ModelEvent
    payload: ToolCall
    operation_id: str
    contract: ToolContract | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str = ""
    approved: bool = False  # an approval granted it: the policy is asked again before it runs
    # How far it got, for what an exception means (_broken): an attempt of it may have run (a
    # started receipt), the tool returned (its outcome, not yet recorded).
    attempt: int = 0
    may_have_run: bool = False
    returned: ToolOutcome | None = None


@dataclass
class _Final:
    outcome: str
    output: str
    is_error: bool
    external_id: str | None = None
    postcondition: str | None = None
    error_class: str | None = None
    reconciled: bool = False
    injection: list[str] = field(default_factory=list)
    truncated: bool = False


class Executor:
    def __init__(self, registry: ToolRegistry, policy: Policy,
                 settings: PipelineSettings | None = None, *, group: str = "modelevents-tools",
                 gateway_url: str | None = None, retry_backoff_s: float = 0.2,
                 tenant: str | Collection[str] | None = None,
                 max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT) -> None:
        self.registry = registry
        self.policy = policy
        self.settings = settings or PipelineSettings()
        self.group = group
        self.tenant = tenant  # only these tenants' calls (None: every tenant's)
        self.retry_backoff_s = retry_backoff_s
        self.max_concurrent_calls = max_concurrent_calls  # runs handled at once (dispatch.py)
        self.receipts: dict[str, ToolReceipt] = {}
        self.book = ApprovalBook()  # the calls waiting for an approval, early decisions
        self.continuation = (Continuation(gateway_url, policy, registry)
                             if gateway_url else None)
        self.executed = 0  # calls handled to a final receipt (bench/tools.py reads it)
        # (tool, outcome, error class or "") of every final receipt this process wrote: what
        # `tools run --metrics-port` serves (consumers/tools/metrics.py).
        self.finished: Counter[tuple[str, str, str]] = Counter()
        self._producer: Any = None
        self.lanes: Lanes | None = None  # while run() runs: what is queued and running

    # --- running ------------------------------------------------------------------------------

    async def run(self, ready: Callable[[], object] | None = None) -> None:
        """Consume until cancelled: the events of different runs handled concurrently (up to
        ``max_concurrent_calls``), each run's in order, tenants in turn, offsets committed only
        past what was handled (consumers/tools/dispatch.py). ``ready()`` is called once the
        receipts are read and the subscription is open."""
        lanes = Lanes(self.handle, max_concurrent=self.max_concurrent_calls)
        # Tools run in threads: as many as calls may run at once (the default pool has a few).
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(
            self.max_concurrent_calls, thread_name_prefix="modelevents-tool"))
        self.lanes = lanes
        await self.start()
        try:
            async with subscribe("events", group=self.group, kinds=KINDS, tenant=self.tenant,
                                 settings=self.settings) as events:
                if ready is not None:
                    ready()
                await lanes.feed(events)
        finally:
            await self.stop()

    async def start(self) -> None:
        """Connect the producer and read the receipts so far (``run`` does it; so may a caller
        that feeds :meth:`handle` itself)."""
        # No linger: every send is awaited before the call goes on (a receipt before the tool).
        # Concurrent calls' sends still travel together: the idempotent producer has one request
        # in flight per broker, and what is sent meanwhile goes in the next one.
        self._producer = await clients.start_producer(self.settings, linger_ms=0)
        await self.load_receipts()

    async def stop(self) -> None:
        if self.continuation is not None:
            await self.continuation.close()
        if self._producer is not None:
            await self._producer.stop()

    async def load_receipts(self) -> None:
        """Every receipt so far: the latest record of each operation, and the budgets spent."""
        async for record in clients.read_records(self.settings, "receipts", to_end=True,
                                                 timeout=2.0):
            if record is None or record.raw is None:
                continue
            try:
                receipt = decode_receipt(record.raw)
            except SchemaError as exc:
                log.warning("receipts offset %s unreadable: %s", record.offset, exc)
                continue
            if self.book.restore(receipt):
                continue
            self._remember(receipt)
            if receipt.phase == "started":
                self.policy.charge(receipt.tenant, receipt.run_id, receipt.cost)

    def _remember(self, receipt: ToolReceipt) -> None:
        self.receipts[receipt.operation_id] = receipt

    async def handle(self, event: ModelEvent) -> None:
        if event.kind == "tool.call" and isinstance(event.payload, ToolCall):
            await self._on_call(_Call(event, event.payload,
                                      operation_id(event.run_id, event.payload.tool_call_id)))
        elif event.kind == "approval.resolved" and isinstance(event.payload, Approval):
            await self._on_decision(event)
        elif (event.kind == "tool.result" and isinstance(event.payload, ToolResult)
              and self.continuation is not None):
            await self.continuation.after_result(event)

    # --- one call -------------------------------------------------------------------------------

    async def _on_call(self, call: _Call) -> None:
        """One call to its final receipt. Whatever goes wrong inside becomes that call's final
        receipt and result (:meth:`_broken`), and the executor goes on with the next call."""
        try:
            await self._take_call(call)
        except (KafkaUnavailable, ConfigError):
            raise  # no broker, no topic: the process stops; the next one takes the call again
        except Exception as exc:  # a stop (CancelledError) is no Exception: it stays a stop
            await self._broken(call, exc)

    async def _take_call(self, call: _Call) -> None:
        latest = self.receipts.get(call.operation_id)
        if latest is not None and latest.phase == "finished" and latest.result is not None:
            # Decided before (a redelivery, a replay, a restart after the receipt): the same
            # answer again, under the same event id — nothing runs.
            await self._send_result(call, latest.result, latest.result_is_error, {
                "operation_id": call.operation_id, "outcome": latest.outcome, "repeated": True})
            return
        name = call.payload.tool_name
        call.contract = self.registry.get(name)
        if call.contract is None:
            # A model offers tools the executor may not have (a bundle's, an application's
            # own): the model and the audit read which ones this executor runs.
            await self._refuse(call, "invalid", f"unknown tool {name!r}: this application "
                               "offers no such tool (its executor runs "
                               f"{', '.join(sorted(c.name for c in self.registry)) or 'none'})")
            return
        try:
            arguments = parse_arguments(await self._arguments_text(call),
                                        max_bytes=call.contract.max_argument_bytes,
                                        max_depth=call.contract.max_argument_depth)
        except ArgumentsRefused as exc:
            await self._refuse(call, "invalid", f"arguments of {name!r} {exc}")
            return
        problems = call.contract.argument_errors(arguments)
        if problems:
            await self._refuse(call, "invalid", f"arguments of {name!r} do not fit its schema "
                               f"(version {call.contract.schema_version}): "
                               + "; ".join(problems))
            return
        call.arguments = arguments
        call.idempotency_key = call.contract.idempotency_key(
            call.event.run_id, call.payload.tool_call_id, arguments)
        if latest is not None:
            # Attempted before and not final. Started and never finished (the executor
            # stopped), or finished unknown: it may have happened, reconcile first. A retryable
            # failure (stopped while backing off): nothing happened, the next attempt.
            call.attempt = latest.attempt
            call.may_have_run = latest.phase == "started" or latest.outcome == "unknown"
            await self._attempts(call, latest.attempt + 1, reconcile_first=call.may_have_run)
            return
        if await self._asked_already(call):
            return
        decision = self.policy.admit(call.event.tenant, call.event.run_id, call.contract,
                                     arguments, approved=call.approved)
        if decision.verdict == "deny":
            when = " when its approval was granted" if call.approved else ""
            await self._refuse(call, "denied", f"not allowed{when}: {decision.reason}")
        elif decision.verdict == "approve":
            await self._ask_approval(call, decision.reason)
        else:
            await self._run_admitted(call)

    async def _run_admitted(self, call: _Call) -> None:
        """Run a call the policy admitted; its held place in the budgets is given back unless
        an attempt started (and was charged)."""
        try:
            await self._attempts(call, 1, reconcile_first=False)
        finally:
            latest = self.receipts.get(call.operation_id)
            if latest is None or latest.attempt < 1:
                assert call.contract is not None
                self.policy.release(call.event.tenant, call.event.run_id, call.contract.cost)

    async def _asked_already(self, call: _Call) -> bool:
        """A call proposed again while it waits for its approval: the same arguments ask the
        same approval again (its event id dedupes it); other arguments are never substituted —
        the call id is refused and nothing runs."""
        waiting = self.book.of_operation(call.operation_id)
        if waiting is None or call.approved:
            return False
        if arguments_hash(call.arguments) == waiting.arguments_hash:
            await self._request(call, waiting, "asked again: the call was proposed again")
            return True
        self.book.withdraw(call.operation_id)
        await self._refuse(call, "conflict", f"tool call {call.payload.tool_call_id!r} was "
                           "proposed again with other arguments while it waited for approval "
                           f"{waiting.approval_id}: neither runs; propose it under a new call id")
        return True

    async def _ask_approval(self, call: _Call, why: str) -> None:
        hashed = arguments_hash(call.arguments)
        event, encoded = held_call(call.event, orjson.dumps(call.arguments).decode())
        if len(encoded) > HELD_CALL_BYTES:
            await self._refuse(call, "invalid", f"the call is {len(encoded)} bytes, too large "
                               f"to hold for an approval (at most {HELD_CALL_BYTES}); send "
                               "smaller arguments")
            return
        waiting = Waiting(new_approval_id(hashed), call.event.tenant, call.event.run_id,
                          call.operation_id, hashed, event)
        # Recorded before it is asked: a restarted executor still finds the call.
        await clients.await_acks(self.settings, [await self._send_receipt(self._receipt_of(
            call, 0, AWAITING, now_ms(), approval_id=waiting.approval_id,
            arguments_hash=hashed, held_call=encoded))])
        early = self.book.park(waiting)
        if early is not None:
            await self._decided(waiting, early.granted, early.arguments_hash)
            return
        await self._request(call, waiting, why)

    async def _request(self, call: _Call, waiting: Waiting, why: str) -> None:
        # The arguments shown are the ones that run, as their hash names them: never the text
        # the model sent (duplicate keys a reader takes one way and the parser another; "" on a
        # call whose arguments were elided).
        await self._ingest(approval_event(
            call.event, "approval.requested",
            Approval(approval_id=waiting.approval_id, tool_name=call.payload.tool_name,
                     arguments=orjson.dumps(call.arguments).decode()),
            orjson.dumps({"reason": why, "operation_id": call.operation_id,
                          HASH_FIELD: waiting.arguments_hash}), now_ms()))

    async def _on_decision(self, event: ModelEvent) -> None:
        if not decides_executor_approvals(event):
            return  # a provider's own approval item (mcp_approval_response): not ours to act on
        payload = event.payload
        assert isinstance(payload, Approval)
        granted, hashed = payload.decision == GRANTED, decision_hash(event)
        waiting = self.book.take(event.tenant, event.run_id, payload.approval_id)
        if waiting is None:
            answered = self.book.answered(event.tenant, event.run_id, payload.approval_id)
            if answered is not None:
                await self._answer_again(answered)
                return
            self.book.keep_early(event.tenant, event.run_id, payload.approval_id,
                                 EarlyDecision(granted, hashed))
            return
        await self._decided(waiting, granted, hashed)

    async def _answer_again(self, answered: Answered) -> None:
        """A decision read again after its call was answered (redelivered: the executor may
        have died between the final receipt and the tool.result): that result again, under
        the same event id — nothing runs."""
        latest = self.receipts.get(answered.operation_id)
        if latest is None or latest.phase != "finished" or latest.result is None:
            return  # decided and not final yet: its own handling answers it
        about = orjson.dumps({"untrusted": True, "operation_id": answered.operation_id,
                              "outcome": latest.outcome, "repeated": True})
        await self._ingest(executor_event(
            answered.run, "tool.result", latest.tool_call_id,
            ToolResult(tool_name=latest.tool_name, tool_call_id=latest.tool_call_id,
                       output=latest.result, is_error=latest.result_is_error),
            about, ENVELOPE_TYPE, now_ms()))

    async def _decided(self, waiting: Waiting, granted: bool, hashed: str | None) -> None:
        try:
            event = waiting.event()
        except SchemaError as exc:
            log.error("approval %s: the call held for it cannot be read (%s); it is not run",
                      waiting.approval_id, exc)
            return
        assert isinstance(event.payload, ToolCall)
        call = _Call(event, event.payload, waiting.operation_id, approved=True)
        if hashed is not None and hashed != waiting.arguments_hash:
            await self._refuse(call, "denied", "not allowed: the approval was decided on other "
                               "arguments than the call waiting for it")
        elif not granted:
            await self._refuse(call, "denied", "not allowed: the approval was denied")
        else:
            # From the start, as approved: checked, then the policy is asked again.
            await self._on_call(call)

    async def _refuse(self, call: _Call, error_class: str, reason: str) -> None:
        await self._finish(call, 0, now_ms(), _Final("failed", reason, True,
                                                      error_class=error_class), cost=0.0)

    async def _attempts(self, call: _Call, attempt: int, reconcile_first: bool) -> None:
        contract = call.contract
        assert contract is not None
        if reconcile_first:
            if contract.reconcile is None and contract.action == "write":
                await self._finish(call, attempt - 1, now_ms(), _Final(
                    "unknown", f"{contract.name}: attempt {attempt - 1} started and its outcome "
                    "was never recorded (the executor stopped, or the outcome was unknown); the "
                    "tool has no reconcile hook to check it, and it was not run again because "
                    "it may have happened", True, error_class="unknown"), cost=0.0)
                return
            earlier = await self._reconcile(call)
            if earlier is not None:
                await self._finish(call, attempt - 1, now_ms(),
                                   self._succeeded(call, earlier.output, earlier.external_id,
                                                   reconciled=True), cost=0.0)
                return
        last_error = ""
        while attempt <= contract.max_attempts:
            started = now_ms()
            call.attempt = attempt
            await self._receipt(self._receipt_of(call, attempt, "started", started,
                                                 cost=contract.cost))
            call.may_have_run = True
            self.policy.charge(call.event.tenant, call.event.run_id, contract.cost)
            context = CallContext(call.operation_id, call.idempotency_key, attempt,
                                  call.event.tenant, call.event.run_id, call.payload.tool_call_id)
            retry_after = self.retry_backoff_s * attempt
            try:
                value = await asyncio.wait_for(
                    asyncio.to_thread(contract.run, call.arguments, context), contract.timeout_s)
            except TimeoutError:
                kind = "unknown" if contract.action == "write" else "retryable"
                last_error = f"no answer within {contract.timeout_s} s"
            except ToolError as exc:
                kind, last_error = exc.kind, message_of(exc)
                if exc.retry_after_s is not None:
                    retry_after = exc.retry_after_s
            except Exception as exc:  # a tool's own bug: nothing is known to have happened
                kind, last_error = "permanent", described(exc)
            else:
                outcome = value if isinstance(value, ToolOutcome) else ToolOutcome(value)
                call.returned = outcome
                await self._finish(call, attempt, started,
                                   self._succeeded(call, outcome.output, outcome.external_id),
                                   cost=outcome.cost)
                return
            if kind == "permanent":
                await self._finish(call, attempt, started, _Final(
                    "failed", f"{contract.name} failed: {last_error}", True,
                    error_class="permanent"), cost=0.0)
                return
            await self._receipt(self._receipt_of(
                call, attempt, "finished", started, outcome="failed" if kind == "retryable"
                else "unknown", error_class=kind, error=last_error))
            if kind == "unknown":
                if contract.reconcile is None:
                    await self._finish(call, attempt, started, _Final(
                        "unknown", f"{contract.name}: the outcome is unknown ({last_error}) and "
                        "cannot be checked; it was not retried because it may have happened",
                        True, error_class="unknown"), cost=0.0)
                    return
                earlier = await self._reconcile(call)
                if earlier is not None:
                    await self._finish(call, attempt, started,
                                       self._succeeded(call, earlier.output, earlier.external_id,
                                                       reconciled=True), cost=0.0)
                    return
            else:
                await asyncio.sleep(retry_after)
            attempt += 1
        await self._finish(call, attempt - 1, now_ms(), _Final(
            "failed", f"{contract.name} failed after {contract.max_attempts} attempts: "
            f"{last_error}", True, error_class="retryable"), cost=0.0)

    async def _broken(self, call: _Call, exc: Exception) -> None:
        """The final receipt of a call whose handling raised: never a failure of a tool that
        may have acted, never a retry. The tool returned: succeeded, with a note that its
        output could not be recorded; an attempt may have run: unknown; else failed (internal).
        Should even that not be written: Kafka is down, the process stops (the next one finds
        the attempt unfinished, or no receipt at all); Kafka refused the record (ids too large
        for one), the call is logged and left unanswered — never a crash loop."""
        log.exception("call %s of run %s: its handling failed", call.operation_id,
                      call.event.run_id)
        name = call.payload.tool_name
        why = described(exc)
        if call.returned is not None:
            final = _Final("succeeded", f"{name} ran and returned, but its output could not be "
                           f"recorded ({why}); it was not run again", False,
                           external_id=call.returned.external_id, postcondition="not_checked",
                           error_class="internal")
        elif call.may_have_run:
            final = _Final("unknown", f"{name}: the outcome is unknown ({why}); it was not "
                           "retried because it may have happened", True, error_class="internal")
        else:
            final = _Final("failed", f"the executor could not handle this call ({why}); "
                           "nothing was run", True, error_class="internal")
        try:
            await self._finish(call, call.attempt, now_ms(), final, cost=0.0)
        except (KafkaUnavailable, ConfigError):
            raise
        except Exception:
            log.exception("call %s of run %s: not even its final receipt could be written; it "
                          "is left unanswered", call.operation_id, call.event.run_id)

    async def _arguments_text(self, call: _Call) -> str:
        """The call's arguments; elided on the event (over the piece limit), rebuilt from the
        run's ``tool.call.delta`` events — or refused, never read as ``{}``."""
        elided = call.event.elided
        if elided is None or elided.field != "arguments":
            return call.payload.arguments
        contract = call.contract
        assert contract is not None
        if elided.size > contract.max_argument_bytes:
            raise ArgumentsRefused(f"are {elided.size} bytes, over the limit of "
                                   f"{contract.max_argument_bytes}; send smaller arguments")
        try:
            return await rebuilt_arguments(self.settings, call.event)
        except (ValueError, SchemaError) as exc:
            raise ArgumentsRefused(f"({elided.size} bytes) were too large for the tool.call "
                                   f"and could not be rebuilt from the run's deltas ({exc}); "
                                   "nothing was run") from None

    async def _reconcile(self, call: _Call) -> Earlier | None:
        contract = call.contract
        if contract is None or contract.reconcile is None:
            return None
        return await asyncio.to_thread(contract.reconcile, call.operation_id,
                                       call.idempotency_key)

    def _succeeded(self, call: _Call, output: Any, external_id: str | None,
                   reconciled: bool = False) -> _Final:
        contract = call.contract
        assert contract is not None
        drift = contract.output_errors(output)
        if drift:
            return _Final("failed", f"{contract.name} returned a result that does not fit its "
                          f"output schema (version {contract.schema_version}): "
                          + "; ".join(drift), True, external_id=external_id,
                          postcondition="violated", error_class="drift", reconciled=reconciled)
        verdict = "not_checked"
        if contract.postcondition is not None:
            verdict = ("confirmed" if contract.postcondition(call.arguments, output)
                       else "violated")
        shaped = shape_output(output, contract.max_output_bytes)
        if verdict == "violated":
            return _Final("failed", f"{contract.name} answered, but the system of record does "
                          "not confirm it", True, external_id=external_id,
                          postcondition=verdict, error_class="permanent", reconciled=reconciled)
        return _Final("succeeded", shaped.text, False, external_id=external_id,
                      postcondition=verdict, reconciled=reconciled, injection=shaped.injection,
                      truncated=shaped.truncated)

    # --- writing --------------------------------------------------------------------------------

    def _receipt_of(self, call: _Call, attempt: int, phase: str, started: int, **fields: Any
                    ) -> ToolReceipt:
        contract = call.contract
        return ToolReceipt(
            operation_id=call.operation_id, idempotency_key=call.idempotency_key or "-",
            run_id=call.event.run_id, tenant=call.event.tenant,
            tool_name=call.payload.tool_name, tool_call_id=call.payload.tool_call_id,
            schema_version=contract.schema_version if contract else "-", attempt=attempt,
            phase=phase, started_at=started,
            finished_at=None if phase == "started" else now_ms(), **fields)

    async def _finish(self, call: _Call, attempt: int, started: int, final: _Final,
                      cost: float) -> None:
        """The final receipt (with the result) and the result for the model, sent together
        and both acknowledged. Should the executor die before the receipt's acknowledgement,
        the next one finds the attempt unfinished and reconciles it (a write without a hook:
        unknown); after it, it sends the same result again (the same event id: deduped)."""
        if final.is_error:
            shaped = shape_error(final.output)
            final.output, final.injection, final.truncated = (shaped.text, shaped.injection,
                                                              shaped.truncated)
        receipt = self._receipt_of(
            call, attempt, "finished", started, outcome=final.outcome,
            external_id=final.external_id, postcondition=final.postcondition,
            error_class=final.error_class, error=final.output if final.is_error else None,
            reconciled=final.reconciled, result=final.output, result_is_error=final.is_error,
            cost=cost)
        result = self._result_event(call, final.output, final.is_error, {
            "operation_id": call.operation_id, "outcome": final.outcome,
            "injection": final.injection, "truncated": final.truncated,
            "external_id": final.external_id, "reconciled": final.reconciled})
        await clients.await_acks(self.settings, [await self._send_receipt(receipt),
                                                 await self._send_ingest(result)])
        self._remember(receipt)
        self._count(receipt)
        self.executed += 1

    def _result_event(self, call: _Call, output: str, is_error: bool,
                      about: dict[str, Any]) -> ModelEvent:
        envelope = orjson.dumps({"untrusted": True, **about})
        return tool_result_event(call.event, call.payload.tool_name, call.payload.tool_call_id,
                                 output, is_error, envelope, ENVELOPE_TYPE, now_ms())

    async def _send_result(self, call: _Call, output: str, is_error: bool,
                           about: dict[str, Any]) -> None:
        await self._ingest(self._result_event(call, output, is_error, about))

    async def _send_receipt(self, receipt: ToolReceipt) -> asyncio.Future[Any]:
        topic = clients.topic_name(self.settings, "receipts")
        future: asyncio.Future[Any] = await self._producer.send(
            topic, key=clients.run_key_bytes(receipt.run_id), value=encode_receipt(receipt))
        return future

    async def _send_ingest(self, event: ModelEvent) -> asyncio.Future[Any]:
        return await clients.send_record(self._producer, self.settings, "ingest", event.run_id,
                                         event)

    async def _receipt(self, receipt: ToolReceipt) -> None:
        await clients.await_acks(self.settings, [await self._send_receipt(receipt)])
        self._remember(receipt)
        self._count(receipt)

    def _count(self, receipt: ToolReceipt) -> None:
        if receipt.phase == "finished":
            self.finished[(receipt.tool_name, receipt.outcome or "", receipt.error_class or "")] += 1

    async def _ingest(self, event: ModelEvent) -> None:
        await clients.await_acks(self.settings, [await self._send_ingest(event)])
