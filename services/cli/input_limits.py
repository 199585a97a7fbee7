"""The input-limit options of the commands that read a user's recording (normalize, feed).

Not a command itself (services/cli/main.py loads only the modules in COMMAND_MODULES). The limits
themselves, and why each exists, are in adapters/limits.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from modelevents.adapters.limits import DEFAULT_LIMITS, OPTIONS, InputLimits, parse_size


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size in bytes (e.g. 1048576, 512K, 64M, 2G)") from None


def _count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _mib(size: int) -> str:
    return f"{size >> 20}M"


def _options() -> list[tuple[str, Callable[[str], int], str, str]]:
    """(InputLimits field, argument type, metavar, help) of each option, defaults in the help."""
    d = DEFAULT_LIMITS
    return [
        ("max_body_bytes", _size, "SIZE",
         f"one cassette response body, decompressed (default {_mib(d.max_body_bytes)})"),
        ("max_cassette_bytes", _size, "SIZE",
         f"all response bodies of one cassette together, decompressed "
         f"(default {_mib(d.max_cassette_bytes)})"),
        ("max_ratio", _count, "N",
         f"a compressed body may expand at most N times once past 1M (default {d.max_ratio}; "
         f"recorded provider bodies stay below 10)"),
        ("max_yaml_alias_nodes", _count, "N",
         f"YAML nodes a cassette's anchors/aliases may add once expanded "
         f"(default {d.max_yaml_alias_nodes:,}; VCR recorders write none)"),
        ("max_event_bytes", _size, "SIZE",
         f"one frame: an SSE event, a JSON line, a JSON array element or a whole JSON object "
         f"(default {_mib(d.max_event_bytes)})"),
    ]


def add_input_limit_options(parser: argparse.ArgumentParser) -> None:
    """--max-body-bytes, --max-cassette-bytes, --max-ratio, --max-yaml-alias-nodes,
    --max-event-bytes: what reading one file may cost, so a hostile one cannot exhaust memory."""
    group = parser.add_argument_group(
        "input limits",
        "Bounds on what one input may expand to (gzip bombs, YAML alias bombs, endless events). "
        "Past one, the command stops with one error line naming the limit, and exit status 2; "
        "raise a limit only for input you trust. Sizes take K, M, G suffixes (binary).")
    for name, kind, metavar, text in _options():
        group.add_argument(OPTIONS[name], dest=name, type=kind, metavar=metavar, help=text,
                           default=getattr(DEFAULT_LIMITS, name))


def limits_from_args(args: argparse.Namespace) -> InputLimits:
    return InputLimits(**{name: getattr(args, name) for name in OPTIONS})
