"""``Idempotency-Key`` of ``POST /v1/runs``, the same on every gateway replica and after restarts.

A client that retries a POST sends the same key: the first answer is given again (header
``Idempotent-Replayed: true``) and nothing is sent twice, whichever replica the retry reaches;
the same key with another body is a 422; a retry while the first request is still being
answered is a 409 (retry shortly). The keys are records of the ``calls`` topic (``records.py``:
pending → answered, or released when the request got no 202), per tenant.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.calls.host import CallsHost
from modelevents.services.gateway.calls.records import ANSWERED, PENDING, CallsView, KeyRecord
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["answer_or_claim", "remember", "release"]


async def answer_or_claim(gateway: CallsHost, tenant: str, key: str,
                          digest: str) -> JSONResponse | KeyRecord:
    """The key's first answer again, or the key's claim for this request (go on; then
    :func:`remember` its 202 or :func:`release` it); a GatewayProblem for a key reused or still
    pending, KafkaUnavailable (503) when the claim is not read back in time."""
    view = gateway.calls
    known = view.key(tenant, key)
    if known is None:
        claim = await view.claim_key(tenant, key, digest, gateway.publish_call,
                                     gateway.config.ack_timeout_s)
        if claim is None:
            raise KafkaUnavailable(gateway.settings.bootstrap_servers,
                                   f"the Idempotency-Key {key!r} was not read back within "
                                   f"{gateway.config.ack_timeout_s:g} s")
        known, ours = claim
        if ours:
            return known
    return _refusal_or_replay(known, digest)


def _refusal_or_replay(known: KeyRecord, digest: str) -> JSONResponse:
    if known.digest != digest:
        raise GatewayProblem(ProblemCode.idempotency_key_reused, (
            f"Idempotency-Key {known.key!r} was used for another request body; use a new key "
            "for a new request"))
    if known.state == PENDING or known.answer is None:
        raise GatewayProblem(ProblemCode.idempotency_key_pending, (
            f"a request with Idempotency-Key {known.key!r} is being answered; retry in a moment"))
    answer = known.answer
    return JSONResponse(answer, status_code=202, headers={
        "Location": answer["links"]["state"], "Idempotent-Replayed": "true"})


async def remember(gateway: CallsHost, claim: KeyRecord, answer: dict[str, Any]) -> None:
    """The key's answer, for ever, written before the call is sent (KafkaUnavailable: the
    caller's 503, with nothing sent)."""
    record = CallsView.answered(claim, answer)
    try:
        written = await gateway.publish_call(record.record_key(), record.encode())
    except KafkaUnavailable:
        # The ack was lost, but the record may be on the log: then the key is answered for
        # ever, and answering 503 without sending would leave every retry a 202 for a call
        # never made. Wait for the view to show it; only a key still unanswered is a 503. (A
        # record that reaches the log later still is that case: its run's call record says
        # "not sent", and reconcile reports it.)
        if await _read_back(gateway, record):
            return
        raise
    # Read back, so that a retry reaching this process at once finds the answer, not a claim.
    await gateway.calls.wait_read(written.partition, written.offset, gateway.config.ack_timeout_s)


async def _read_back(gateway: CallsHost, record: KeyRecord) -> bool:
    def answered() -> bool:
        known = gateway.calls.key(record.tenant, record.key)
        return known is not None and known.nonce == record.nonce and known.state == ANSWERED
    return await gateway.calls.wait_until(answered, gateway.config.ack_timeout_s)


async def release(gateway: CallsHost, claim: KeyRecord) -> None:
    """A request that got no 202 leaves nothing: its retry is a new attempt (best effort: an
    unreleased claim holds the key for PENDING_TTL_MS)."""
    record = CallsView.released(claim)
    try:
        await gateway.publish_call(record.record_key(), record.encode())
    except Exception:
        pass

