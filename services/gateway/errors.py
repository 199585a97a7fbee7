"""The problem each exception a request can end with is answered as (``problems.py``): the
client's mistakes are 4xx that say what to change, and a 503 (with Retry-After) means one thing
only — Kafka did not acknowledge, nothing was kept, send the same request again.

    GatewayProblem                                    itself (raised by a route)
    RequestValidationError (FastAPI)                  422 invalid_request, `errors` per field
    KafkaUnavailable, ConfigError (a topic missing)   503 kafka_unavailable
    InputError (an id, a framing, a render …)         422 invalid_input
    anything else                                     500 internal, with an error id

A 500 says only its error id: the exception, its message and its traceback — which may name the
server's files — go to the gateway's log under that id, never to the client.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from fastapi.exceptions import RequestValidationError

from modelevents.schemas.errors import ConfigError, InputError
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["problem_of", "internal"]

log = logging.getLogger("modelevents.gateway")


def problem_of(exc: BaseException, where: str) -> GatewayProblem:
    """The problem to answer for ``exc``, raised while serving ``where`` (logged as it deserves)."""
    if isinstance(exc, GatewayProblem):
        return exc
    if isinstance(exc, RequestValidationError):
        return _invalid_request(exc)
    if isinstance(exc, (KafkaUnavailable, ConfigError)):
        log.warning("%s: answered 503: %s", where, exc)
        reason = (f"Kafka behind the gateway did not take the request "
                  f"({exc.detail or 'unreachable'})" if isinstance(exc, KafkaUnavailable)
                  else str(exc))
        # The client is told what happened, not how to run Kafka (the log says that).
        return GatewayProblem(ProblemCode.kafka_unavailable, reason,
                              retry="nothing was kept; send the same request again")
    if isinstance(exc, InputError):
        log.info("%s: answered 422: %s", where, exc)
        return GatewayProblem(ProblemCode.invalid_input, str(exc))
    return internal(exc, where, "the gateway failed on this request; nothing was kept")


def internal(exc: BaseException, where: str, what: str, **facts: Any) -> GatewayProblem:
    """A 500 for the gateway's own failure: ``what`` happened (and ``facts``), and the id the
    log has ``exc`` under."""
    error_id = f"err_{secrets.token_hex(8)}"
    log.error("%s: answered 500, error id %s: %r", where, error_id, exc, exc_info=exc)
    return GatewayProblem(ProblemCode.internal, f"{what} — report error id {error_id} with the "
                          "gateway's log", **facts, error_id=error_id)


def _invalid_request(exc: RequestValidationError) -> GatewayProblem:
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "invalid"}
    where = ".".join(str(part) for part in first["loc"][1:]) or "body"
    return GatewayProblem(ProblemCode.invalid_request, f"invalid request: {where}: {first['msg']}"
                          + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                          errors=errors)
