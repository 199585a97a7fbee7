"""``modelevents otel export``: follow the events topic and send each finished run to an
OpenTelemetry collector as GenAI spans (consumers/otel_genai.py says which).

services/cli/main.py loads this module by its dotted path (``COMMAND_MODULES``). A summary goes to
stdout when the command ends (``--idle-timeout``, SIGINT or SIGTERM); warnings to stderr. Exit
status: 0 when it stopped as asked, 2 for an error (the ``otel`` extra missing, a collector that
did not take a run's spans within ``--give-up-after``, an unreachable broker).
"""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from modelevents.consumers.client import subscribe
from modelevents.consumers.otel_genai import DEFAULT_MAX_OPEN, KINDS, SERVICE_NAME, RunFolder
from modelevents.schemas.errors import ConfigError
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    positive_int,
    settings_from_args,
)

DEFAULT_ENDPOINT = "http://localhost:4318"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "otel", help="export finished runs to OpenTelemetry (GenAI spans over OTLP/HTTP)",
        description="OpenTelemetry for the pipeline's runs. `export` follows the events topic "
                    "and sends each run that finishes as a trace: a span for the run, a `chat` "
                    "span per provider call with the gen_ai.* attributes of the GenAI semantic "
                    "conventions (provider, models, response id, finish reasons, token usage "
                    "with cache tokens), and an `execute_tool` span per tool call. Needs the "
                    "otel extra: pip install 'modelevents[otel]'.",
        epilog=ENV_HELP)
    sub = parser.add_subparsers(dest="otel_command", metavar="ACTION", required=True)
    p = sub.add_parser(
        "export", help="send finished runs to an OTLP/HTTP collector as GenAI spans",
        description="Follow the events topic (only the kinds it needs: run.*, usage, error, "
                    "tool and hosted calls) and, for each run that finishes, send its spans in "
                    "one OTLP/HTTP request. A run open when the command starts (or when a "
                    "group member restarts) is exported from the events it sees, its run span "
                    "marked modelevents.partial=true.",
        epilog="Exit status: 0 stopped as asked, 2 error.")
    p.add_argument("--endpoint", default=None, metavar="URL",
                   help="the collector's OTLP/HTTP address; /v1/traces is added to a bare host "
                        "(default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
                        f"$OTEL_EXPORTER_OTLP_ENDPOINT, or {DEFAULT_ENDPOINT})")
    p.add_argument("--header", action="append", default=[], metavar="NAME=VALUE",
                   help="an HTTP header of every export request (repeatable), e.g. an API key")
    p.add_argument("--service-name", default=SERVICE_NAME,
                   help=f"the resource's service.name (default {SERVICE_NAME})")
    p.add_argument("--group", default=None,
                   help="a consumer group: resume from its committed offsets, share the "
                        "partitions with its other members (default: none, nothing committed)")
    p.add_argument("--from", dest="start", choices=("earliest", "latest"), default="latest",
                   help="where to start without a committed offset (default latest: the runs "
                        "that finish from now on)")
    p.add_argument("--tenant", action="append", default=None, help="only this tenant (repeatable)")
    p.add_argument("--provider", action="append", default=None,
                   help="only this provider: openai, anthropic, google (repeatable)")
    p.add_argument("--idle-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="stop after this many seconds without an event (default: follow for ever)")
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="SECONDS",
                   help="one export request's time limit (default 10)")
    p.add_argument("--give-up-after", type=positive_float, default=60.0, metavar="SECONDS",
                   help="how long to keep trying a run the collector does not take before "
                        "stopping with an error (default 60; with --group the run is not "
                        "committed, so the next start sends it)")
    p.add_argument("--max-open", type=positive_int, default=DEFAULT_MAX_OPEN, metavar="N",
                   help=f"unfinished runs held in memory (default {DEFAULT_MAX_OPEN:,})")
    add_kafka_options(p)
    p.set_defaults(run=run_export)


def endpoint_of(args: argparse.Namespace) -> str:
    if args.endpoint:
        return args.endpoint
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return traces or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT


def headers_of(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--header {value!r}: NAME=VALUE")
        headers[name.strip()] = text.strip()
    return headers


def _stop(*_: Any) -> None:
    raise KeyboardInterrupt


def run_export(args: argparse.Namespace) -> int:
    from modelevents.consumers.otel_genai import SpanExporter

    settings = settings_from_args(args)
    exporter = SpanExporter(endpoint_of(args), service_name=args.service_name,
                            headers=headers_of(args.header), timeout=args.timeout,
                            give_up_after=args.give_up_after)
    folder = RunFolder(args.max_open)
    signal.signal(signal.SIGTERM, _stop)  # a service manager's stop is a normal end
    events = subscribe("events", group=args.group, start=args.start, tenant=args.tenant,
                       providers=args.provider, kinds=KINDS, settings=settings,
                       idle_timeout=args.idle_timeout)
    try:
        with events:
            for event in events:
                run = folder.feed(event)
                if run is not None:
                    exporter.export(run)
    except KeyboardInterrupt:
        pass
    finally:
        exporter.close()
    print(f"exported {exporter.runs} finished runs ({exporter.spans} spans) to "
          f"{exporter.endpoint}; {folder.open_runs} runs not finished, {folder.dropped} dropped "
          f"(over --max-open)", flush=True)
    return 0
