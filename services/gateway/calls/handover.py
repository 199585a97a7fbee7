"""What the gateway does with the calls records (``records.py``) so that its replicas act as one.

- :func:`begin_call` claims a run's call before anything is sent: a call of the run in flight on
  any replica is a 409, and of two replicas racing the partition's order picks one.
- :func:`carry_out` carries a call out and keeps its record current: the provider object id as
  soon as the call learns it (another replica can then cancel it), and ``ended`` with the last
  cursor at its end. Before each poll the call asks whether its record still names it; once
  another process took it up, it stops polling.
- :func:`cancel_elsewhere` cancels a background call another replica polls: the provider object
  id is the record's, the provider's answer is published as a poll frame, and the record turns
  ``cancel_requested``, which makes the polling replica poll at once.
- :func:`keep_calls` runs while the gateway runs: its instance's heartbeat on the calls topic
  every third of the lease (``call_lease_s``, default 60 s), and :func:`take_up_calls`.

A call is polled by the process its record names; another process takes it up only when that
process is gone, and only one does.

More on this module: docs/architecture.md, ``services/gateway/calls/handover.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from modelevents.adapters.registry import API_FACTS
from modelevents.adapters.requests import Endpoint, WireRequest
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.calls.host import CallsHost
from modelevents.services.gateway.calls.records import (
    CANCEL_REQUESTED,
    ENDED,
    CallRecord,
    InstanceBeat,
    now_ms,
)
from modelevents.services.gateway.calls.runner import (
    CallOutcome,
    CallRunner,
    CallTiming,
    ProviderCall,
)
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["begin_call", "carry_out", "cancel_elsewhere", "keep_calls", "take_up_calls", "take_up",
           "read_back_runner", "update_call", "READ_BACK_APIS"]

log = logging.getLogger("modelevents.gateway.handover")

# The APIs whose provider objects a GET reads back (their ApiFacts' follow_up.get).
READ_BACK_APIS = frozenset(api for api, facts in API_FACTS.items() if facts.follow_up.get)
_TRIES = 5  # writes of one record version that may lose a race in a row


def in_flight_elsewhere(gateway: CallsHost, record: CallRecord | None) -> bool:
    """Whether ``record`` is a call in flight that is not one of this process's (one of ours
    that no longer runs here is over, whatever its record says: its end was not written)."""
    if record is None or not record.in_flight:
        return False
    if record.incarnation != gateway.incarnation:
        return True
    runner = gateway.runs.latest(record.run_id)
    return (runner is not None and runner.call.call_tag == record.call
            and gateway.runs.busy(record.run_id))


def conflict(record: CallRecord) -> GatewayProblem:
    return GatewayProblem(ProblemCode.conflict, (
        f"call {record.call} of run {record.run_id!r} is still in flight on gateway instance "
        f"{record.instance!r}; wait for it to end (GET the run) before sending its next call"))


async def begin_call(gateway: CallsHost, call: ProviderCall, *, note: str | None = None,
                     object_id: str | None = None, supersede: str | None = None) -> CallRecord:
    """Claim ``call`` as its run's call in flight (module docstring): 409 while another one is
    (but the call ``supersede``, which this one takes up), KafkaUnavailable (503) when the record
    is not read back in time."""
    view = gateway.calls
    for _ in range(_TRIES):
        current = view.call(call.run_id)
        superseded = current is not None and supersede is not None and current.call == supersede
        if not superseded and in_flight_elsewhere(gateway, current):
            raise conflict(current)  # type: ignore[arg-type]
        fields: dict[str, Any] = dict(
            call=call.call_tag, instance=gateway.instance, incarnation=gateway.incarnation,
            provider=call.provider, api=call.api, model=call.model, background=call.background,
            stream=call.stream, state="in_flight", object_id=object_id, cursor=None, note=note)
        record = (current.next(**fields) if current is not None else
                  CallRecord(run_id=call.run_id, tenant=call.tenant, rev=1, updated_at=now_ms(),
                             **fields))
        won = await view.write(record, gateway.publish_call, gateway.config.ack_timeout_s)
        if won is None:
            break
        if won:
            return record
    raise KafkaUnavailable(gateway.settings.bootstrap_servers,
                           f"the calls record of run {call.run_id!r} was not read back within "
                           f"{gateway.config.ack_timeout_s:g} s")


async def update_call(gateway: CallsHost, run_id: str, call_tag: str,
                      **changes: Any) -> CallRecord | None:
    """Write the next version of the run's record while it names ``call_tag`` (best effort:
    None, logged, when it names another call or Kafka did not take it)."""
    view = gateway.calls
    try:
        for _ in range(_TRIES):
            current = view.call(run_id)
            if current is None or current.call != call_tag:
                return None
            record = current.next(**changes)
            won = await view.write(record, gateway.publish_call, gateway.config.ack_timeout_s)
            if won:
                return record
            if won is None:
                break
    except Exception as exc:
        log.warning("run %s: its calls record was not updated (%s): %s", run_id, changes, exc)
        return None
    log.warning("run %s: its calls record was not updated (%s)", run_id, changes)
    return None


async def carry_out(gateway: CallsHost, runner: CallRunner,
                    work: Awaitable[CallOutcome]) -> None:
    """Carry out ``work`` (the runner's run or settle) and keep the call's record current."""
    call = runner.call
    view = gateway.calls

    def still_ours() -> bool:
        record = view.call(call.run_id)
        return record is None or record.call == call.call_tag

    async def tell_object_id() -> None:
        await runner.object_known.wait()
        await update_call(gateway, call.run_id, call.call_tag,
                          object_id=runner.outcome.object_id)

    runner.still_ours = still_ours
    watcher = asyncio.create_task(tell_object_id(), name=f"calls record {call.run_id}")
    stopped = False
    try:
        await work
    except asyncio.CancelledError:
        stopped = True  # the gateway stops (a deploy, SIGTERM)
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        outcome = runner.outcome
        # A background call with an object is left in flight when the gateway stops, for the
        # next process of this instance id to take up; any other call ends here.
        if not (stopped and call.background and outcome.object_id is not None):
            note = ("its gateway stopped during the call" if stopped
                    else outcome.error or (outcome.notes[-1] if outcome.notes else None))
            await update_call(gateway, call.run_id, call.call_tag, state=ENDED,
                              object_id=outcome.object_id, cursor=runner.cursor, note=note)


def read_back_runner(gateway: CallsHost, record: CallRecord, call_tag: str) -> CallRunner:
    """A runner of the provider object ``record`` names, as a new call of its run (a read-back:
    its frames have a call tag of their own, so they never collide with the first call's)."""
    provider = gateway.config.provider(record.provider)
    if provider is None or not provider.takes_runs:
        raise GatewayProblem(ProblemCode.invalid_input, f"provider {record.provider!r} is not "
                             "configured on this gateway")
    call = ProviderCall(
        run_id=record.run_id, tenant=record.tenant, call_tag=call_tag,
        wire=WireRequest(record.api, record.provider, record.model, Endpoint("GET", ""), {}),
        stream=False, background=True, base_url=provider.base_url,
        api_key=provider.api_key.get_secret_value() if provider.api_key else None)
    runner = CallRunner(call, gateway.http, gateway.publish_all, timing(gateway))
    runner.outcome.object_id = record.object_id
    return runner


def timing(gateway: CallsHost) -> CallTiming:
    config = gateway.config
    return CallTiming(poll_initial=config.poll_initial_s, poll_max=config.poll_max_s,
                      terminal_timeout=config.terminal_timeout_s, attempts=config.call_attempts,
                      backoff=config.call_backoff_s)


async def cancel_elsewhere(gateway: CallsHost, record: CallRecord) -> dict[str, Any] | None:
    """Ask the provider to cancel the call another process polls (module docstring); the
    provider's answer, None when the record names no object yet."""
    if record.object_id is None:
        return None
    runner = read_back_runner(gateway, record, gateway.runs.next_tag(record.run_id))
    answer = await runner.cancel()  # FollowUpFailed: the route's 502
    await update_call(gateway, record.run_id, record.call, state=CANCEL_REQUESTED)
    return answer


def nudge_on_cancel(gateway: CallsHost, record: CallRecord) -> None:
    """A listener of the calls view: a cancel another process sent for one of this process's
    calls makes it poll now."""
    if record.state != CANCEL_REQUESTED or record.incarnation != gateway.incarnation:
        return
    runner = gateway.runs.latest(record.run_id)
    if runner is not None and runner.call.call_tag == record.call:
        runner.look_again()


async def take_up(gateway: CallsHost, record: CallRecord, why: str) -> CallRunner | None:
    """Take the call ``record`` names up here (module docstring); the runner polling it, or None
    when it cannot be polled (its record is then ended with a note)."""
    if not (record.background and record.object_id and record.api in READ_BACK_APIS
            and gateway.config.provider(record.provider) is not None):
        await update_call(gateway, record.run_id, record.call, state=ENDED, note=(
            f"{why}: not a background call with a provider object to poll, so it was not taken "
            "up; the run's state says where it stopped"))
        return None
    runner = read_back_runner(gateway, record, gateway.runs.next_tag(record.run_id))
    await begin_call(gateway, runner.call, object_id=record.object_id,
                     note=f"{why}: call {record.call} taken up", supersede=record.call)
    gateway.runs.start(runner, carry_out(gateway, runner, runner.settle()))
    log.info("run %s: %s: polling %s %s (call %s taken up as %s)", record.run_id, why,
             record.api, record.object_id, record.call, runner.call.call_tag,
             extra=runner.call.log_fields)
    return runner


async def keep_calls(gateway: CallsHost) -> None:
    """While the gateway runs (a task of the app's lifespan): once the calls view has read the
    topic, and then every third of the lease, this instance's heartbeat and
    :func:`take_up_calls`."""
    view = gateway.calls
    await view.caught_up.wait()
    at_start = True
    while True:
        beat = InstanceBeat(gateway.instance, gateway.incarnation, now_ms())
        try:
            await gateway.publish_call(beat.record_key(), beat.encode())
        except Exception as exc:
            log.warning("the heartbeat of instance %s was not written: %s", gateway.instance, exc)
        try:
            await take_up_calls(gateway, at_start=at_start)
        except Exception:
            # Never end the loop: without this task's heartbeat other replicas would take up
            # this process's calls while it still polls them.
            log.exception("taking up calls in flight failed; trying again in %g s",
                          gateway.config.call_lease_s / 3)
        at_start = False
        await asyncio.sleep(gateway.config.call_lease_s / 3)


async def take_up_calls(gateway: CallsHost, *, at_start: bool = False) -> int:
    """Take up the calls in flight that an earlier process of this instance id left (``at_start``
    only: later, another process of this id is a live twin, whose calls stay its own), and those
    of instances not heard of for the lease (module docstring); how many."""
    view = gateway.calls
    lease_ms = gateway.config.call_lease_s * 1000
    taken = 0
    for record in list(view.calls.values()):
        if not record.in_flight or record.incarnation == gateway.incarnation:
            continue
        if record.instance == gateway.instance:
            if not at_start:
                continue
            why = "its gateway restarted"
        elif now_ms() - view.heard_of(record) > lease_ms:
            why = (f"its gateway instance {record.instance!r} was not heard of for "
                   f"{gateway.config.call_lease_s:g} s")
        else:
            continue
        try:
            if await take_up(gateway, record, why) is not None:
                taken += 1
        except GatewayProblem as exc:
            if exc.code is not ProblemCode.conflict:
                log.error("run %s: call %s not taken up: %s", record.run_id, record.call,
                          exc.detail)
            # a conflict: another replica took it up first
        except Exception as exc:  # one call that cannot be taken up does not stop the others
            log.error("run %s: call %s not taken up: %s", record.run_id, record.call, exc)
    if taken:
        log.info("took up %d call(s)", taken)
    return taken
