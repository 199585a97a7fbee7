"""Each tenant's limits on proxied calls (services/gateway/proxy/limits.py): the token bucket,
the calls in flight, the tokens of the UTC day summed from run states, and the config's checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelevents.schemas.events import Usage
from modelevents.schemas.run_state import RunState
from modelevents.services.gateway.problems import ProblemCode
from modelevents.services.gateway.proxy.identity import Refused
from modelevents.services.gateway.proxy.limits import (
    DAY_MS,
    DailyTokens,
    TenantLimiter,
    TokenBucket,
)
from modelevents.services.gateway.upstreams import ProxyConfig

DAY = 20_000  # a UTC day number
NOON_MS = DAY * DAY_MS + DAY_MS // 2


class Clock:
    def __init__(self, at: float = 1000.0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def state(run_id: str, tenant: str, tokens: int | None, at_ms: int = NOON_MS,
          **usage: int) -> RunState:
    return RunState(run_id=run_id, tenant=tenant, updated_at=at_ms,
                    usage=Usage(total_tokens=tokens, **usage))


def limiter(tenants: dict, clock: Clock | None = None, wall_ms: int = NOON_MS) -> TenantLimiter:
    return TenantLimiter(ProxyConfig(tenants=tenants), clock=clock or Clock(),
                         usage=DailyTokens(lambda: wall_ms))


def refusal(limits: TenantLimiter, tenant: str, create: bool = True) -> Refused:
    with pytest.raises(Refused) as refused:
        limits.admit(tenant, create=create)
    return refused.value


# --- the bucket -------------------------------------------------------------------------------


def test_bucket_lets_its_burst_through_then_says_when_the_next_token_comes() -> None:
    bucket = TokenBucket(per_minute=60, capacity=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(1.0)  # 60 a minute: one a second
    assert bucket.take(0.25) == pytest.approx(0.75)
    assert bucket.take(1.0) == 0.0
    assert bucket.take(1.0) > 0


def test_bucket_refills_no_further_than_its_capacity() -> None:
    bucket = TokenBucket(per_minute=120, capacity=2, now=0.0)
    assert bucket.take(0.0) == 0.0
    taken = [bucket.take(3600.0) for _ in range(3)]  # an idle hour: still 2 tokens, not 7200
    assert taken[:2] == [0.0, 0.0] and taken[2] == pytest.approx(0.5)


def test_requests_per_minute_refuses_rate_limited_with_retry_after() -> None:
    clock = Clock()
    limits = limiter({"acme": {"requests_per_minute": 120, "burst": 2}}, clock)
    limits.admit("acme", create=True)
    limits.admit("acme", create=False)  # follow-ups count as requests too
    refused = refusal(limits, "acme")
    assert refused.code is ProblemCode.rate_limited and refused.code.status == 429
    assert refused.headers == {"Retry-After": "1", "retry-after-ms": "500"}
    assert "requests_per_minute" in refused.message and "'acme'" in refused.message
    clock.at += 0.5
    limits.admit("acme", create=True)


def test_each_tenant_has_its_own_bucket_and_default_covers_the_unnamed() -> None:
    limits = limiter({"default": {"requests_per_minute": 1}, "acme": {"max_in_flight": 5}})
    limits.admit("globex", create=True)
    assert refusal(limits, "globex").code is ProblemCode.rate_limited
    limits.admit("initech", create=True)  # another tenant: another bucket
    for _ in range(3):  # acme's entry replaces default's: no rate limit
        limits.admit("acme", create=True)


def test_no_entry_no_limit() -> None:
    limits = limiter({})
    slots = [limits.admit("acme", create=True) for _ in range(1000)]
    assert len(slots) == 1000 and limits.in_flight == {}


# --- calls in flight --------------------------------------------------------------------------


def test_max_in_flight_counts_calls_until_released() -> None:
    limits = limiter({"acme": {"max_in_flight": 2}})
    first, second = limits.admit("acme", create=True), limits.admit("acme", create=False)
    refused = refusal(limits, "acme")
    assert refused.code is ProblemCode.rate_limited and "max_in_flight" in refused.message
    limits.admit("globex", create=True)  # another tenant is not held up
    first.release()
    first.release()  # twice is once
    third = limits.admit("acme", create=True)
    assert limits.in_flight == {"acme": 2}
    second.release()
    third.release()
    assert limits.in_flight == {}


def test_a_slot_dropped_unreleased_frees_its_call() -> None:
    limits = limiter({"acme": {"max_in_flight": 1}})
    limits.admit("acme", create=True)  # dropped at once (an answer never sent)
    limits.admit("acme", create=True).release()
    assert limits.in_flight == {}


def test_a_refused_call_takes_no_bucket_token() -> None:
    limits = limiter({"acme": {"max_in_flight": 1, "requests_per_minute": 2}})
    held = limits.admit("acme", create=True)
    refusal(limits, "acme")  # over max_in_flight, before the bucket
    held.release()
    limits.admit("acme", create=True).release()  # the bucket's second token


# --- the tokens of the day --------------------------------------------------------------------


def test_daily_tokens_add_each_states_increase_per_tenant() -> None:
    usage = DailyTokens(lambda: NOON_MS)
    first = state("run_a", "acme", 100)
    usage.observe(None, first)
    usage.observe(first, state("run_a", "acme", 250))  # the run grew by 150
    usage.observe(None, state("run_b", "acme", None, input_tokens=30, output_tokens=20))
    usage.observe(None, state("run_c", "globex", 7))
    assert usage.by_tenant() == {"acme": 300, "globex": 7}
    assert usage.used("acme") == 300 and usage.used("initech") == 0


def test_daily_tokens_start_again_each_utc_day() -> None:
    now = [NOON_MS]
    usage = DailyTokens(lambda: now[0])
    usage.observe(None, state("run_a", "acme", 100, at_ms=NOON_MS - DAY_MS))  # yesterday's
    usage.observe(None, state("run_b", "acme", 40))
    usage.observe(None, state("run_c", "acme", 999, at_ms=NOON_MS - DAY_MS))  # read late
    assert usage.used("acme") == 40
    now[0] += DAY_MS  # tomorrow: nothing used yet
    assert usage.used("acme") == 0 and usage.by_tenant() == {}


def test_tokens_per_day_refuses_creates_once_reached_naming_budget_and_reset() -> None:
    limits = limiter({"acme": {"tokens_per_day": 500}}, wall_ms=NOON_MS)
    limits.usage.observe(None, state("run_a", "acme", 499))
    limits.admit("acme", create=True)
    limits.usage.observe(None, state("run_b", "acme", 1))
    refused = refusal(limits, "acme")
    assert refused.code is ProblemCode.budget_exhausted and refused.code.status == 429
    assert "500" in refused.message and "tokens_per_day" in refused.message
    assert "used 500" in refused.message
    assert "T00:00:00Z" in refused.message
    assert refused.headers == {"Retry-After": str(DAY_MS // 2 // 1000)}  # noon to midnight
    limits.admit("acme", create=False)  # a poll of a response spends no tokens


# --- the config -------------------------------------------------------------------------------


@pytest.mark.parametrize(("tenants", "says"), [
    ({"acme": {"requests_per_minute": 0}}, "requests_per_minute"),
    ({"acme": {"max_in_flight": -1}}, "max_in_flight"),
    ({"acme": {"tokens_per_day": "lots"}}, "tokens_per_day"),
    ({"acme": {"request_per_minute": 5}}, "request_per_minute"),
    ({"acme": {"burst": 5}}, "set requests_per_minute as well"),
    ({"bad tenant!": {"max_in_flight": 1}}, "proxy.tenants"),
])
def test_bad_limits_are_refused_naming_the_setting(tenants: dict, says: str) -> None:
    with pytest.raises(ValidationError) as error:
        ProxyConfig(tenants=tenants)
    assert says in str(error.value)


def test_limits_of_a_tenant_fall_back_to_default() -> None:
    config = ProxyConfig(tenants={"default": {"max_in_flight": 4},
                                  "acme": {"tokens_per_day": 2_000_000}})
    assert config.limits_of("acme").tokens_per_day == 2_000_000
    assert config.limits_of("acme").max_in_flight is None
    assert config.limits_of("globex").max_in_flight == 4
    assert ProxyConfig().limits_of("acme") is None
