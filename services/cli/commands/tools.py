"""``modelevents tools run``: the tool executor (consumers/tools) as a process."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.metrics import serve_metrics
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.registry import load_registry
from modelevents.schemas.errors import ConfigError
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    load_from_args,
    run_async,
)
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.settings.sources import EXAMPLE_TOOLS


def register(sub: argparse._SubParsersAction) -> None:
    tools = sub.add_parser("tools", help="the tool executor: run application tools the model "
                                         "calls, under policy, with receipts")
    commands = tools.add_subparsers(dest="tools_command", required=True)
    p = commands.add_parser(
        "run",
        help="execute the application tools that runs call (tool.call on events)",
        description="Consume tool.call events, ask the policy (--policy), run the registered "
                    "tool under its contract, write a ToolReceipt per attempt to the receipts "
                    "topic and the tool.result to ingest; with --gateway, continue the runs of "
                    "tenants whose policy says auto_continue. A call that already has a final "
                    "receipt never runs again; an unknown outcome is reconciled before any "
                    "retry. Provider-hosted tools are never executed. Stops on Ctrl-C.",
        epilog=ENV_HELP + " Exit status: 0 stopped, 2 error (Kafka unreachable, topics missing, "
                          "a registry or policy that cannot be loaded).")
    p.add_argument("--tools", default=None, metavar="MODULE",
                   help="dotted path of a module defining `registry` (a ToolRegistry) or "
                        f"`make_registry(**options)` (default: {EXAMPLE_TOOLS}, the SQLite "
                        "examples get_weather and add_note)")
    p.add_argument("--db", type=Path, default=None, metavar="PATH",
                   help="passed to make_registry as db= (the SQLite examples' database)")
    p.add_argument("--policy", type=Path, default=None, metavar="FILE",
                   help="the policy (YAML or JSON): tenants, allowed tools, object scopes, "
                        "budgets, approvals, auto-continue (consumers/tools/policy.py); "
                        "required, here or as tools.policy in the config file")
    p.add_argument("--group", default=None,
                   help="consumer group (default modelevents-tools)")
    p.add_argument("--gateway", metavar="URL", default=None,
                   help="the gateway that continues runs (POST /v1/runs), e.g. "
                        "http://127.0.0.1:8080; without it runs are left to the application")
    p.add_argument("--tenant", action="append", default=None, metavar="T",
                   help="only the calls of this tenant's runs (repeat for several; default: "
                        "every tenant's — the policy still decides what each may do)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics on GET http://HOST:PORT/metrics: "
                        "modelevents_tools_executions_total{tool,outcome,error_class} "
                        "(default: none)")
    p.add_argument("--metrics-host", default=None, metavar="ADDRESS",
                   help="the address of the metrics endpoint (default 127.0.0.1: this machine "
                        "only; 0.0.0.0 for a scraper on another host or outside a container)")
    p.add_argument("--max-concurrent", type=int, default=None, metavar="N",
                   help="calls of different runs handled at once; a run's calls always one "
                        "after another, tenants served in turn (default 16; more for tools "
                        "that mostly wait on the network)")
    add_kafka_options(p)
    p.set_defaults(run=_run)


def tools_options(args: argparse.Namespace) -> dict[str, tuple[object, str]]:
    """The executor's options as settings of the tree."""
    return {"tools.policy": (args.policy, "--policy"), "tools.module": (args.tools, "--tools"),
            "tools.db": (args.db, "--db"), "tools.group": (args.group, "--group"),
            "tools.gateway_url": (args.gateway, "--gateway"),
            "tools.tenants": (args.tenant, "--tenant"),
            "tools.metrics_port": (args.metrics_port, "--metrics-port"),
            "tools.metrics_host": (args.metrics_host, "--metrics-host"),
            "tools.max_concurrent_calls": (args.max_concurrent, "--max-concurrent")}


def _run(args: argparse.Namespace) -> int:
    resolved = load_from_args(args, tools_options(args))
    config = resolved.settings.tools
    if config.policy is None:
        raise ConfigError("tools run needs a policy: --policy FILE, or tools.policy in the "
                          "config file")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    options = {"db": config.db} if config.db is not None else {}
    executor = Executor(load_registry(config.module, **options), Policy.from_file(config.policy),
                        PipelineSettings.from_kafka(resolved.settings.kafka), group=config.group,
                        gateway_url=config.gateway_url, tenant=config.tenants,
                        max_concurrent_calls=config.max_concurrent_calls)
    if config.metrics_port is not None:
        server = serve_metrics(executor, config.metrics_port, config.metrics_host)
        logging.getLogger("modelevents.tools").info(
            "metrics on http://%s:%d/metrics", config.metrics_host, server.server_port)
    try:
        run_async(executor.run())
    except KeyboardInterrupt:
        pass
    return 0
