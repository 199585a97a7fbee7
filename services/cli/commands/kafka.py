"""``modelevents kafka start|stop|status``: the project's own local Kafka broker.

Wire it into the top-level parser with ``kafka.register(subparsers)`` (services/cli/main.py lists it in
``COMMAND_MODULES``); the parsed namespace then carries ``run``, which returns the exit code::

    args = parser.parse_args(argv)
    return args.run(args)

Progress goes to stderr, results (``status``) to stdout.
"""

from __future__ import annotations

import argparse
import sys

from modelevents.services.errors import KafkaSetupError
from modelevents.services.local import kafka_broker
from modelevents.services.local.kafka_broker import LocalBrokerSettings

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_NOT_RUNNING = 3  # `status` of a stopped broker (as in LSB init scripts)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``kafka`` subcommand to a top-level ``add_subparsers()`` object."""
    parser = subparsers.add_parser(
        "kafka",
        help="run a local single-node Apache Kafka broker (KRaft) for development and tests",
        description=(
            "Manage the project's own Apache Kafka broker: one KRaft node (broker + controller) on "
            "127.0.0.1, built from Maven Central jars (needs java >= 17 and mvn; the jars are "
            "fetched once and cached). If KAFKA_BOOTSTRAP_SERVERS is set, `start` starts nothing "
            "and uses that broker."
        ),
        epilog=(
            "environment: MODELEVENTS_KAFKA_PORT (default 9092), MODELEVENTS_KAFKA_CONTROLLER_PORT "
            "(default port+1), MODELEVENTS_KAFKA_VERSION, MODELEVENTS_KAFKA_HEAP, "
            "MODELEVENTS_KAFKA_JVM_OPTS, KAFKA_BOOTSTRAP_SERVERS. "
            "Exit status: 0 ok, 1 error, 3 `status` of a stopped broker."
        ),
    )
    parser.add_argument(
        "action",
        choices=("start", "stop", "status"),
        help="start: start the broker (no-op if it already runs) and wait until it accepts clients; "
        "stop: shut it down (SIGTERM, then SIGKILL after the timeout); "
        "status: say whether it runs, its pid, address, data dir and log file",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="broker port on 127.0.0.1 (default: $MODELEVENTS_KAFKA_PORT or 9092); "
        "each port has its own data dir, so several brokers can run side by side",
    )
    parser.add_argument(
        "--controller-port",
        type=int,
        default=None,
        help="KRaft controller port (default: broker port + 1)",
    )
    parser.add_argument(
        "--version",
        dest="kafka_version",
        default=None,
        metavar="X.Y.Z",
        help=f"Apache Kafka version to fetch and run (default: $MODELEVENTS_KAFKA_VERSION or "
        f"{kafka_broker.DEFAULT_VERSION})",
    )
    parser.add_argument(
        "--heap",
        default=None,
        metavar="SIZE",
        help="maximum JVM heap of the broker, e.g. 512m or 1g (default: $MODELEVENTS_KAFKA_HEAP or 512m)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start: how long to wait for the broker to accept clients (default 90); "
        "stop: how long to wait after SIGTERM before SIGKILL (default 30)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start: delete the broker's data (all topics) first and format new storage",
    )
    parser.set_defaults(run=run)


def _settings(args: argparse.Namespace) -> LocalBrokerSettings:
    overrides: dict[str, object] = {}
    if args.port is not None:
        overrides["port"] = args.port
    if args.controller_port is not None:
        overrides["controller_port"] = args.controller_port
    if args.kafka_version is not None:
        overrides["version"] = args.kafka_version
    if args.heap is not None:
        overrides["heap"] = args.heap
    return LocalBrokerSettings(**overrides)  # type: ignore[arg-type]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Carry out ``args.action``; return the exit code."""
    try:
        settings = _settings(args)
        if args.action == "start":
            result = kafka_broker.start(settings, _progress, timeout=args.timeout, fresh=args.fresh)
            if not result.started and not result.external:
                _progress(f"broker already running at {result.bootstrap_servers} (pid {result.pid})")
            print(result.bootstrap_servers)
            return EXIT_OK
        if args.action == "stop":
            if not kafka_broker.stop(settings, _progress, timeout=args.timeout):
                _progress(f"no broker of this project is running on port {settings.port}")
            return EXIT_OK
        st = kafka_broker.status(settings)
        print(f"state:     {st.state}")
        print(f"pid:       {st.pid if st.pid is not None else '-'}")
        print(f"port:      {st.port}")
        print(f"bootstrap: {st.bootstrap_servers}" + ("  (from KAFKA_BOOTSTRAP_SERVERS)" if st.external else ""))
        print(f"version:   {st.version}")
        print(f"data dir:  {st.data_dir}")
        print(f"log file:  {st.log_file}")
        return EXIT_OK if st.running else EXIT_NOT_RUNNING
    except KafkaSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m modelevents.services.cli.commands.kafka start``."""
    parser = argparse.ArgumentParser(prog="modelevents")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["kafka", *(sys.argv[1:] if argv is None else argv)])
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
