"""The SQLite example tools (consumers/tools/sqlite_tools.py) as a system of record: WAL mode,
and their fault injection used up call by call."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import pytest

from modelevents.consumers.tools.contract import ToolError
from modelevents.consumers.tools.sqlite_tools import make_registry


@dataclass
class _Context:
    idempotency_key: str
    attempt: int = 1
    operation_id: str = "op"


def _weather(tmp_path):
    db = tmp_path / "tools.db"
    contract = make_registry(db).get("get_weather")
    assert contract is not None
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO weather VALUES ('Paris', 14.0, 'cloudy')")
    return db, contract


def test_the_database_is_in_wal_mode(tmp_path):
    db, _ = _weather(tmp_path)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_call_is_served_while_another_connection_reads(tmp_path):
    db, contract = _weather(tmp_path)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM weather").fetchone() == (1,)
    try:  # in WAL mode the reader's open transaction does not hold the writer off
        assert contract.run({"city": "Paris"}, _Context("k1"))["sky"] == "cloudy"
    finally:
        reader.execute("COMMIT")
        reader.close()


def test_an_armed_fault_is_used_up_once_per_call_and_every_call_is_logged(tmp_path):
    db, contract = _weather(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO tool_faults VALUES ('get_weather', 'rate_limited', 2, 0.5)")
    for n in range(2):
        with pytest.raises(ToolError) as refused:
            contract.run({"city": "Paris"}, _Context(f"k{n}"))
        assert refused.value.kind == "retryable" and refused.value.retry_after_s == 0.5
    assert contract.run({"city": "Paris"}, _Context("k2"))["city"] == "Paris"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT remaining FROM tool_faults").fetchall() == [(0,)]
        assert conn.execute("SELECT idempotency_key FROM tool_invocations").fetchall() == [
            ("k0",), ("k1",), ("k2",)]
