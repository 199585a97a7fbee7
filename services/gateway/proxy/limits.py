"""Each tenant's limits on its calls (``proxy.tenants``), checked before anything is sent: the
drop-in proxy's (``relay.py``) and ``POST /v1/runs``'s (``routes/runs.py``) share them.

    limiter = TenantLimiter(config.proxy)
    run_states.watchers.add(limiter.usage.observe)   # before the view reads ``runs``
    slot = limiter.admit(tenant, create=True)          # raises Refused (429) or holds a slot
    …
    slot.release()                                      # when the answer has been relayed

Three limits, each O(1) per request and read from memory (no Kafka read on the hot path):

- ``tokens_per_day`` (create calls only): the tokens the tenant's runs used on the current UTC
  day, summed by :class:`DailyTokens` from the runs' states as the gateway's view of ``runs``
  reads them (each state's usage less the run's previous state's). Every process reads the same
  topic, so every replica sees the same sum; it lags the provider by the worker's latency, so a
  call in flight can take a tenant past its budget: the next one is refused. A run's tokens
  count on the UTC day of its state's ``updated_at``.
- ``max_in_flight``: the tenant's calls in flight on this process (a :class:`Slot` each).
- ``requests_per_minute``: a :class:`TokenBucket` per tenant and process (``burst`` requests,
  refilled at the rate); N replicas let through N times the rate between them.

A refusal is ``budget_exhausted`` (Retry-After: the next UTC midnight) or ``rate_limited``
(Retry-After / retry-after-ms: when the bucket has a token, or 1 s for calls in flight).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from modelevents.schemas.run_state import RunState
from modelevents.services.gateway.problems import ProblemCode
from modelevents.services.gateway.proxy.identity import Refused
from modelevents.services.gateway.upstreams import ProxyConfig, TenantLimits

__all__ = ["DailyTokens", "Slot", "TenantLimiter", "TokenBucket", "run_tokens"]

DAY_MS = 86_400_000
# Buckets kept (least recently used dropped): without api_tokens a client names its tenant, and
# a bucket unused for a minute is full again, as a new one is.
BUCKETS = 100_000


class TokenBucket:
    """``capacity`` tokens, refilled at ``per_minute`` a minute; a request takes one."""

    __slots__ = ("rate", "capacity", "tokens", "at")

    def __init__(self, per_minute: int, capacity: int, now: float) -> None:
        self.rate = per_minute / 60.0  # tokens a second
        self.capacity = float(capacity)
        self.tokens = float(capacity)
        self.at = now

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until the bucket has one."""
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


def run_tokens(state: RunState | None) -> int:
    """The tokens a run used so far: the provider's total, else input + output."""
    usage = state.usage if state is not None else None
    if usage is None:
        return 0
    if usage.total_tokens is not None:
        return usage.total_tokens
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)


class DailyTokens:
    """Tokens each tenant's runs used on the current UTC day (see the module docstring)."""

    def __init__(self, wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.wall_ms = wall_ms
        self._days: dict[str, tuple[int, int]] = {}  # tenant → (UTC day number, tokens)

    def observe(self, before: RunState | None, after: RunState) -> None:
        """A RunStates watcher: the tokens ``after`` adds to its run's."""
        added = run_tokens(after) - run_tokens(before)
        if added <= 0:
            return
        day = (after.updated_at if after.updated_at is not None else self.wall_ms()) // DAY_MS
        counted = self._days.get(after.tenant)
        if counted is None or counted[0] < day:
            self._days[after.tenant] = (day, added)
        elif counted[0] == day:
            self._days[after.tenant] = (day, counted[1] + added)
        # An earlier day's state read late adds nothing to today's.

    def used(self, tenant: str) -> int:
        counted = self._days.get(tenant)
        return counted[1] if counted is not None and counted[0] == self.today() else 0

    def today(self) -> int:
        return self.wall_ms() // DAY_MS

    def by_tenant(self) -> dict[str, int]:
        """Every tenant's tokens of the current UTC day (what the gauge shows)."""
        today = self.today()
        return {tenant: tokens for tenant, (day, tokens) in self._days.items() if day == today}


class Slot:
    """A call in flight of a tenant; :meth:`release` (once, or when dropped) frees it."""

    __slots__ = ("_counts", "tenant", "_held")

    def __init__(self, counts: dict[str, int] | None, tenant: str) -> None:
        self._counts, self.tenant, self._held = counts, tenant, counts is not None
        if counts is not None:
            counts[tenant] = counts.get(tenant, 0) + 1

    def release(self) -> None:
        if self._held and self._counts is not None:
            self._held = False
            left = self._counts[self.tenant] - 1
            if left:
                self._counts[self.tenant] = left
            else:
                del self._counts[self.tenant]

    # A streamed answer the server never started to send is dropped unread: its slot with it.
    __del__ = release


class TenantLimiter:
    """The limits of ``proxy.tenants`` for this process (see the module docstring)."""

    def __init__(self, config: ProxyConfig, *, clock: Callable[[], float] = time.monotonic,
                 usage: DailyTokens | None = None) -> None:
        self.config = config
        self.clock = clock
        self.usage = usage or DailyTokens()
        self.in_flight: dict[str, int] = {}
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def admit(self, tenant: str, *, create: bool) -> Slot:
        """A slot for one call of ``tenant`` (``create``: one that spends tokens), or Refused."""
        limits = self.config.limits_of(tenant)
        if limits is None:
            return Slot(None, tenant)
        if create and limits.tokens_per_day is not None:
            self._check_budget(tenant, limits.tokens_per_day)
        if limits.max_in_flight is not None \
                and self.in_flight.get(tenant, 0) >= limits.max_in_flight:
            raise _rate_limited(f"tenant {tenant!r} has {limits.max_in_flight} calls in flight "
                                "(its max_in_flight in proxy.tenants)", 1.0)
        if limits.requests_per_minute is not None:
            wait = self._bucket(tenant, limits).take(self.clock())
            if wait > 0:
                raise _rate_limited(f"tenant {tenant!r} is over its requests_per_minute "
                                    f"({limits.requests_per_minute}, proxy.tenants) on this "
                                    "gateway", wait)
        return Slot(self.in_flight if limits.max_in_flight is not None else None, tenant)

    def _check_budget(self, tenant: str, budget: int) -> None:
        used = self.usage.used(tenant)
        if used < budget:
            return
        resets_ms = (self.usage.today() + 1) * DAY_MS
        resets = datetime.fromtimestamp(resets_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        wait_s = max(1, math.ceil((resets_ms - self.usage.wall_ms()) / 1000))
        raise Refused(ProblemCode.budget_exhausted,
                      f"modelevents gateway: tenant {tenant!r} used {used} tokens today (UTC), "
                      f"its tokens_per_day budget is {budget} (proxy.tenants); it resets at "
                      f"{resets}. Nothing was sent to the provider",
                      headers={"Retry-After": str(wait_s)})

    def _bucket(self, tenant: str, limits: TenantLimits) -> TokenBucket:
        bucket = self._buckets.get(tenant)
        per_minute = limits.requests_per_minute or 1
        if bucket is None:
            bucket = TokenBucket(per_minute, limits.burst or per_minute, self.clock())
            self._buckets[tenant] = bucket
            if len(self._buckets) > BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(tenant)
        return bucket


def _rate_limited(why: str, wait_s: float) -> Refused:
    return Refused(ProblemCode.rate_limited,
                   f"modelevents gateway: {why}; nothing was sent to the provider — retry "
                   f"after {wait_s:.3g} s",
                   headers={"Retry-After": str(max(1, math.ceil(wait_s))),
                            "retry-after-ms": str(max(1, math.ceil(wait_s * 1000)))})
