"""Two example tools against a local SQLite database as the system of record:

- ``get_weather`` (read): the weather of a city from the ``weather`` table;
- ``add_note`` (write): a note in a notebook, at most once per idempotency key (a UNIQUE column:
  a second attempt of the same call inserts nothing), with a postcondition (the row is there)
  and a reconcile hook that reads the database for an earlier attempt's row.

``modelevents tools run --tools modelevents.consumers.tools.sqlite_tools --db notes.db``.

The ``tool_faults`` table makes a tool's backend misbehave on purpose (the tests and the
benchmark use it; an empty table is a healthy backend): a row (tool, fault, remaining, seconds)
applies to the next ``remaining`` calls of ``tool``:

    rate_limited         the backend answers 429 (a retryable error, ``seconds`` Retry-After)
    slow_before_commit   ``seconds`` of delay before the write commits
    slow_after_commit    ``seconds`` of delay after the write committed, before the answer

Every call is logged in ``tool_invocations`` (tool, idempotency key, attempt): how a test sees
how often a tool really ran.

The database is in WAL mode with ``synchronous=NORMAL``, as a system of record under concurrent
calls would be: readers never wait for the writer, and a commit appends to the log without an
fsync of its own (a power cut may lose the last commits, never corrupt the file). A call takes
the write lock for its invocation log row alone; only when a fault is armed for its tool does it
take the lock to use one up.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from modelevents.consumers.tools.contract import Earlier, ToolContract, ToolError, ToolOutcome
from modelevents.consumers.tools.registry import ToolRegistry

__all__ = ["make_registry", "create_database", "SCHEMA"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS weather (city TEXT PRIMARY KEY, temperature_c REAL, sky TEXT);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, notebook TEXT NOT NULL, text TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE, operation_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tool_faults (
    tool TEXT NOT NULL, fault TEXT NOT NULL, remaining INTEGER NOT NULL, seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tool_invocations (
    tool TEXT NOT NULL, idempotency_key TEXT NOT NULL, attempt INTEGER NOT NULL);
"""


def create_database(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        # The journal mode is the file's own: every later connection is in WAL mode too.
        db.execute("PRAGMA journal_mode=WAL")
        with db:
            db.executescript(SCHEMA)
    finally:
        db.close()


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=NORMAL")
        yield db
    finally:
        db.close()


def _take_fault(db: sqlite3.Connection, tool: str, fault: str) -> float | None:
    """Use up one occurrence of ``fault`` for ``tool``; its seconds, or None when none is left.
    Whether one is armed is read first, without the write lock: a healthy backend's calls do
    not queue on each other for it."""
    if db.execute("SELECT 1 FROM tool_faults WHERE tool = ? AND fault = ? AND remaining > 0 "
                  "LIMIT 1", (tool, fault)).fetchone() is None:
        return None
    db.execute("BEGIN IMMEDIATE")
    row = db.execute("SELECT rowid, seconds FROM tool_faults WHERE tool = ? AND fault = ? AND "
                     "remaining > 0 LIMIT 1", (tool, fault)).fetchone()
    if row is not None:
        db.execute("UPDATE tool_faults SET remaining = remaining - 1 WHERE rowid = ?", (row[0],))
    db.execute("COMMIT")
    return None if row is None else float(row[1])


def _log_invocation(db: sqlite3.Connection, tool: str, context: Any) -> None:
    db.execute("INSERT INTO tool_invocations VALUES (?, ?, ?)",
               (tool, context.idempotency_key, context.attempt))


def make_registry(db: str | Path = "tools.db", **_options: Any) -> ToolRegistry:
    path = Path(db)
    create_database(path)

    def get_weather(arguments: dict[str, Any], context: Any) -> Any:
        with _connect(path) as conn:
            _log_invocation(conn, "get_weather", context)
            limited = _take_fault(conn, "get_weather", "rate_limited")
            if limited is not None:
                raise ToolError("retryable", "weather backend answered 429 Too Many Requests",
                                retry_after_s=limited)
            row = conn.execute("SELECT city, temperature_c, sky FROM weather WHERE city = ?",
                               (arguments["city"],)).fetchone()
        if row is None:
            raise ToolError("permanent", f"no weather known for {arguments['city']!r}")
        city, temperature, sky = row
        if arguments.get("unit") == "f" and isinstance(temperature, int | float):
            temperature = temperature * 9 / 5 + 32
        return {"city": city, "temperature": temperature, "unit": arguments.get("unit", "c"),
                "sky": sky}

    def add_note(arguments: dict[str, Any], context: Any) -> ToolOutcome:
        with _connect(path) as conn:
            _log_invocation(conn, "add_note", context)
            before = _take_fault(conn, "add_note", "slow_before_commit")
            after = _take_fault(conn, "add_note", "slow_after_commit")
            if before is not None:
                time.sleep(before)
            conn.execute("INSERT INTO notes (notebook, text, idempotency_key, operation_id) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
                         (arguments["notebook"], arguments["text"], context.idempotency_key,
                          context.operation_id))
            note_id = conn.execute("SELECT id FROM notes WHERE idempotency_key = ?",
                                   (context.idempotency_key,)).fetchone()[0]
            if after is not None:
                time.sleep(after)
        return ToolOutcome({"note_id": note_id}, external_id=f"note:{note_id}")

    def note_exists(arguments: dict[str, Any], output: Any) -> bool:
        with _connect(path) as conn:
            row = conn.execute("SELECT notebook, text FROM notes WHERE id = ?",
                               (output["note_id"],)).fetchone()
        return row == (arguments["notebook"], arguments["text"])

    def reconcile_note(operation_id: str, idempotency_key: str) -> Earlier | None:
        with _connect(path) as conn:
            row = conn.execute("SELECT id FROM notes WHERE idempotency_key = ?",
                               (idempotency_key,)).fetchone()
        return None if row is None else Earlier({"note_id": row[0]}, external_id=f"note:{row[0]}")

    registry = ToolRegistry()
    registry.register(ToolContract(
        name="get_weather", run=get_weather, action="read", timeout_s=5.0,
        description="The current weather of a city.",
        parameters={"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": False},
        output_schema={"type": "object", "required": ["city", "temperature", "sky"],
                       "properties": {"city": {"type": "string"},
                                      "temperature": {"type": "number"},
                                      "sky": {"type": "string"}}},
        cost=0.001))
    registry.register(ToolContract(
        name="add_note", run=add_note, action="write", timeout_s=2.0,
        description="Add a note to a notebook.",
        parameters={"type": "object", "properties": {
            "notebook": {"type": "string", "minLength": 1},
            "text": {"type": "string", "minLength": 1, "maxLength": 2000}},
            "required": ["notebook", "text"], "additionalProperties": False},
        output_schema={"type": "object", "required": ["note_id"],
                       "properties": {"note_id": {"type": "integer"}}},
        postcondition=note_exists, reconcile=reconcile_note,
        scope=lambda arguments: f"notebook:{arguments['notebook']}", cost=0.01))
    return registry
