"""How every command logs: ``text`` (the default, as before) or ``json``, one object per line.

``modelevents --log-format json COMMAND …`` (or ``MODELEVENTS_LOG_FORMAT=json``) puts one handler
on the root logger that writes each record to stderr as a JSON object: ``ts`` (ISO 8601, UTC,
milliseconds), ``level``, ``logger``, ``message``, and every field the log call passed with
``extra=`` — the sites that know a run pass ``run_id``, ``tenant`` and ``provider`` — as top-level
fields; ``exc_info`` holds a traceback. The command's own final error (``modelevents: error: …``)
is such a line too.

Commands that set up logging themselves keep working: the gateway's ``--loglevel`` sets the
root's level (its uvicorn server logs through the root in json mode), and the worker puts the
JSON handler back after Faust replaced the root's handlers (:func:`install`).
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from modelevents.schemas.errors import ConfigError

FORMATS = ("text", "json")
ENV = "MODELEVENTS_LOG_FORMAT"
# What a LogRecord carries of its own; anything else on it came from ``extra=``.
_OWN = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

_format = "text"
log = logging.getLogger("modelevents")


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON (see the module docstring for its fields)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
                  .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _OWN and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return orjson.dumps(out, default=repr).decode()


def event_fields(event: Any) -> dict[str, str]:
    """``extra=`` for a log line about an event's run: its run_id, tenant and provider."""
    return {"run_id": event.run_id, "tenant": event.tenant, "provider": event.provider}


def add_option(parser: Any) -> None:
    """The root parser's ``--log-format``."""
    parser.add_argument("--log-format", choices=FORMATS, default=None,
                        help=f"log lines as plain text (default) or as JSON objects, one a line "
                             f"(default: ${ENV} or text)")


def configure(chosen: str | None = None) -> str:
    """Set this process's log format: ``chosen`` (``--log-format``), else $MODELEVENTS_LOG_FORMAT,
    else text. Text leaves logging as each command sets it up."""
    global _format
    value = chosen or os.environ.get(ENV) or "text"
    if value not in FORMATS:
        raise ConfigError(f"{ENV}={value!r}: the log formats are {', '.join(FORMATS)}")
    _format = value
    install()
    return value


def is_json() -> bool:
    return _format == "json"


def install(root: logging.Logger | None = None) -> None:
    """In json mode, make one JSON handler on stderr the root logger's only handler (again, for
    a command whose framework replaced the root's handlers); in text mode, nothing."""
    if not is_json():
        return
    root = root or logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.handlers[:] = [handler]


def uvicorn_log_config() -> dict[str, Any] | None:
    """uvicorn's ``log_config``: its own (text) in text mode; none in json mode, so that its
    loggers propagate to the root's JSON handler."""
    if is_json():
        return None
    from uvicorn.config import LOGGING_CONFIG

    return LOGGING_CONFIG


def report(message: str) -> None:
    """The command's last word on stderr (an error, an interruption): a plain line, or in json
    mode an ERROR record of the ``modelevents`` logger."""
    if is_json():
        if not logging.getLogger().handlers:
            install()
        log.error("%s", message)
    else:
        print(message, file=sys.stderr)
