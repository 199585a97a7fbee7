"""The gateway's read side: a run's current RunState, its owner and its ModelEvents, from Kafka.

- :class:`RunStates` is a materialized view of the compacted ``runs`` topic (a ``TopicView``:
  read from the beginning when the gateway starts, then followed), keeping the latest RunState
  of each run. ``GET /v1/runs/{id}`` answers from it. Memory: one RunState per run the topic
  still holds (about 1 KB each; compaction keeps one record per run, and the processor's
  retention decides how long a finished run stays), and which run announced each provider
  object id, so that a webhook naming the object goes to its run
  (:meth:`RunStates.run_of_object`). The other parts of the read side, the owners of run ids
  (``owners.py``) and the shared readers of followed runs (``followers.py``), are its peers: the
  app's lifespan starts and stops all three (``app.py``), and readiness waits for the views
  (``routes/health.py``).
- :func:`live_run_events` / :func:`run_history` (``reads.py``, re-exported here) read one run's
  events of one tenant from ``events``, each ``seq`` once, in order.

All of this only reads: the one write of the read side is a claim (``owners.py``), made through
the gateway's producer by ``state.Gateway.claim_run``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from modelevents.schemas.run_state import RunState
from modelevents.services.gateway.events.reads import IDLE_TICK_S, live_run_events, run_history
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["RunStates", "live_run_events", "run_history", "IDLE_TICK_S"]

log = logging.getLogger(__name__)


class RunStates(TopicView):
    """The latest RunState of every run on ``runs``, followed live (see the module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, "runs")
        self.states: dict[str, RunState] = {}
        self.object_runs: dict[str, str] = {}  # provider object id → the run that announced it
        # Told (before, after) of every state read: the live run lists (run_list.py).
        self.watchers: set[Callable[[RunState | None, RunState], None]] = set()

    def apply(self, message: Any) -> bool:
        record = clients.decode_record(message)
        if not isinstance(record.value, RunState):
            return False
        state = record.value
        before = self.states.get(state.run_id)
        self.states[state.run_id] = state
        for object_id in state.provider_object_ids:
            self.object_runs.setdefault(object_id, state.run_id)
        for watcher in list(self.watchers):
            watcher(before, state)
        return True

    def get(self, run_id: str) -> RunState | None:
        return self.states.get(run_id)

    def run_of_object(self, object_id: str, tenant: str) -> str | None:
        """The run of ``tenant`` whose state names provider object ``object_id``, if any."""
        run_id = self.object_runs.get(object_id)
        state = self.states.get(run_id) if run_id is not None else None
        return run_id if state is not None and state.tenant == tenant else None

    async def wait_for(self, run_id: str, predicate: Callable[[RunState], bool],
                       timeout: float) -> RunState | None:
        """The run's state once ``predicate(state)`` holds, or the latest after ``timeout``."""
        await self.wait_until(lambda: (s := self.states.get(run_id)) is not None
                              and predicate(s), timeout)
        return self.states.get(run_id)
