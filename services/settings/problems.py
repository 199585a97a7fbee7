"""What is wrong with a configuration, one line per problem, each naming where the value came
from (the variable, the file and its key, or the option), what was wrong and what is allowed.

A secret's value is never part of a line: only where it came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from modelevents.schemas.errors import ConfigError

if TYPE_CHECKING:  # the CLI catches ConfigProblems before any command loaded pydantic
    from pydantic import ValidationError

__all__ = ["ConfigProblems", "SECRET_KEYS", "problem_lines"]

# Keys whose values are secrets wherever they sit in the tree.
SECRET_KEYS = frozenset({"api_key", "webhook_secrets", "api_tokens", "sasl_password",
                         "ssl_password"})


class ConfigProblems(ConfigError):
    """An invalid configuration: ``problems`` is one line each (the CLI prints each as its own
    ``modelevents: error:`` line and exits 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _what(error: Any) -> str:
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind == "int_parsing" or kind == "int_from_float":
        return "is not a whole number"
    if kind == "float_parsing":
        return "is not a number"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {"greater_than_equal": "at least", "greater_than": "greater than",
                 "less_than_equal": "at most", "less_than": "less than"}[kind]
        bound = next(iter(ctx.values()))
        return f"must be {words} {bound}"
    if kind == "extra_forbidden":
        return "is not a setting here"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"]).replace("Input should be", "must be")


def problem_lines(exc: ValidationError, label: Callable[[tuple[str, ...]], str],
                  allowed: Callable[[tuple[str, ...]], str]) -> list[str]:
    """The lines of a ValidationError: ``label(key)`` names where the value at ``key`` came
    from, ``allowed(key)`` lists the settings of the section an unknown key sits in."""
    lines: list[str] = []
    for error in exc.errors():
        key = tuple(str(part) for part in error["loc"])
        where = label(key)
        what = _what(error)
        if error["type"] == "extra_forbidden":
            what += f"; the settings are {allowed(key[:-1])}"
        secret = any(part in SECRET_KEYS for part in key)
        value = error.get("input")
        if error["type"] == "value_error" and "\n" in what:
            # A check of several values at once (the Kafka security settings) says them itself.
            lines += [line for line in what.splitlines()[1:] if line.strip()]
            continue
        if secret or error["type"] in ("extra_forbidden", "value_error") or isinstance(
                value, dict | list):
            lines.append(f"{where}: {what}" if error["type"] != "extra_forbidden"
                         else f"{where} {what}")
        else:
            lines.append(f"{where}={value!r} {what}")
    return [re.sub(r"\s+", " ", line).strip() for line in lines]
