"""What a live eval of the shipped corpus runs on, shared by the eval CLI test and the
migration walkthrough: the simulator given the corpus, the SQLite example tools' database with
the uncertain side effect armed, and the tool executor for a tenant of its own. With
simulated_gateway's ``settings`` (topics and a worker) and ``gateway``."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.eval_tasks import TaskIndex
from modelevents.services.simulator.scenarios import ScenarioRegistry
from modelevents.services.simulator.server import SimulatorHandle, run_in_thread
from tests.integration.tools.test_executor import RunningExecutor, fault


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorHandle]:
    """The simulator given the corpus (``modelevents simulator --corpus example``): each task
    answered with the scenario it names for the request's API, its recordings beside the
    project's."""
    tasks = TaskIndex.load("example")
    assert tasks.recordings is not None
    registry = ScenarioRegistry.default([tasks.recordings], with_corpus=False)
    handle = run_in_thread(Simulator(registry, tasks=tasks).app)
    yield handle
    handle.stop()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The SQLite example tools' database. The first add_note commits and then takes longer than
    its timeout: its outcome is unknown until the executor reconciles it (the uncertain side
    effect, for real)."""
    db = tmp_path / "tools.db"
    make_registry(db)
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO weather VALUES (?, ?, ?)",
                         [("Paris", 14.0, "cloudy"), ("Rome", 21.0, "sunny")])
    fault(db, "add_note", "slow_after_commit", 1, 3.0)
    return db


@pytest.fixture
def executor(settings: PipelineSettings, db: Path) -> Iterator[str]:
    """The tool executor with the SQLite example tools, for a tenant of its own."""
    tenant = f"eval{uuid.uuid4().hex[:8]}"
    policy = Policy.from_dict({"tenants": {tenant: {
        "tools": ["get_weather", "add_note"], "scopes": {"add_note": ["notebook:demo"]},
        "approve_writes": False}}})
    running = RunningExecutor(Executor(make_registry(db), policy, settings, tenant=tenant,
                                       group=f"tools-{tenant}", retry_backoff_s=0.05))
    yield tenant
    running.stop()
