"""The HTTP answer to each error the gateway's routes can raise: the client's mistakes are 4xx
that say what to change, and 503 (with Retry-After) means one thing only — Kafka did not
acknowledge, nothing was kept, send the same request again.

    KafkaUnavailable, ConfigError (a topic missing)   503  Kafka did not take it; retry later
    InputError (an id, a framing, a render …)         422  the request must change
    any other ModelEventsError                        500  the gateway's own failure (logged)
"""

from __future__ import annotations

import logging

from modelevents.schemas.errors import ConfigError, InputError, ModelEventsError
from modelevents.services.errors import KafkaUnavailable

__all__ = ["error_answer", "unavailable", "RETRY_AFTER_S"]

log = logging.getLogger("modelevents.gateway")


def error_answer(exc: ModelEventsError, where: str) -> tuple[int, dict[str, str], dict[str, str]]:
    """``(status, JSON body, headers)`` for ``exc`` raised while serving ``where``."""
    if isinstance(exc, (KafkaUnavailable, ConfigError)):
        log.warning("%s: answered 503: %s", where, exc)
        return unavailable(exc)
    if isinstance(exc, InputError):
        log.info("%s: answered 422: %s", where, exc)
        return 422, {"error": str(exc), "code": "invalid_input"}, {}
    log.error("%s: answered 500: %r", where, exc)
    return 500, {"error": f"the gateway failed on this request ({exc}); nothing was kept — "
                          "report it with the gateway's log", "code": "internal"}, {}


# Seconds a sender is asked to wait before it retries after a 503.
RETRY_AFTER_S = 5


def unavailable(exc: Exception) -> tuple[int, dict[str, str], dict[str, str]]:
    """The answer when Kafka did not acknowledge (or a topic is missing): 503, the reason, and
    Retry-After, so that the provider or application sends the same request again. The client
    is told what happened, not how to run Kafka (the gateway's log says that to the operator)."""
    reason = (f"Kafka behind the gateway did not take the request "
              f"({exc.detail or 'unreachable'})" if isinstance(exc, KafkaUnavailable) else str(exc))
    return (503, {"error": reason, "code": "kafka_unavailable",
                  "retry": "nothing was kept; send the same request again"},
            {"Retry-After": str(RETRY_AFTER_S)})
