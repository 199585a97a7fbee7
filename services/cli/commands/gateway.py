"""``modelevents gateway``: serve the HTTP gateway (services/gateway/app.py) under uvicorn.

Before it listens, the pipeline's topics are verified, as ``modelevents worker`` does: a
missing or mismatched topic stops the command with the fix, instead of a gateway that answers
every webhook with 503. Then uvicorn serves the app until SIGTERM or Ctrl-C (requests in flight
finish; the Kafka producer flushes and stops).
"""

from __future__ import annotations

import argparse
import logging
import signal

from modelevents.services import logs
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    load_from_args,
    run_async,
)

log = logging.getLogger("modelevents.gateway")

LOG_LEVELS = ("debug", "info", "warning", "error")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gateway",
        help="serve the HTTP gateway: runs, webhooks and forwarded streams → frames on Kafka",
        description="Serve the gateway (an ASGI app under uvicorn): POST /v1/runs starts a run "
                    "from a neutral request (routed by the capability manifest, rendered for "
                    "the provider chosen, its stream or background job read and published), GET "
                    "/v1/runs/{id}[/events|/messages] serve its state, events (SSE) and "
                    "transcript, POST /v1/runs/{id}/cancel; POST /webhooks/{provider}[/{tenant}] "
                    "for signed OpenAI and Gemini webhooks; POST /v1/runs/{id}/frames for "
                    "streams an application forwards; GET /healthz and /readyz; OpenAPI at "
                    "/docs. Every 2xx for a delivery means Kafka acknowledged the frames "
                    "(acks=all); 503 means retry. The pipeline's topics must exist (`modelevents "
                    "topics create`) and a worker must run for runs to have states and events.",
        epilog=ENV_HELP + " Providers: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_WEBHOOK_SECRET, "
                          "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, GEMINI_API_KEY (or "
                          "GOOGLE_API_KEY), GEMINI_BASE_URL, GEMINI_WEBHOOK_SECRET (several "
                          "secrets: separate with commas), MODELEVENTS_API_TOKEN; each key, "
                          "secret or token also as NAME_FILE; MODELEVENTS_GATEWAY_INSTANCE (the "
                          "default of --instance-id). The config file (--config) sets "
                          "provider base URLs and keys, webhook secrets per tenant, limits, the "
                          "capability manifest, polling (services/gateway/config.py, "
                          "docs/operations.md); followers of /v1/runs/{id}/events: "
                          "follower_buffer_events (events of a followed run kept for late "
                          "joiners, default 256), follower_queue_events (events one follower "
                          "may have queued and not sent, default 1024), follower_patience_s (how "
                          "long followers may send nothing while one's queue is full before "
                          "that one's stream ends and it resumes with Last-Event-ID, default 2). "
                          "Exit status 2: an invalid configuration (one line per problem).")
    add_gateway_options(p)
    p.set_defaults(run=run)


def add_gateway_options(p: argparse.ArgumentParser) -> None:
    """The options of the gateway (``modelevents ui`` serves the same gateway)."""
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port to listen on (default 8080)")
    p.add_argument("--instance-id", default=None, metavar="ID",
                   help="this replica in the calls records, unique among the live gateways and "
                        "the same after a restart: the next process with it takes up its "
                        "background calls (default: $MODELEVENTS_GATEWAY_INSTANCE, else "
                        "instance_id of the config file, else the host name)")
    add_kafka_options(p, partitions=True)
    p.add_argument("--loglevel", choices=LOG_LEVELS, default="info", help="log level (default info)")


def gateway_options(args: argparse.Namespace) -> dict[str, tuple[object, str]]:
    """The gateway's own options as settings of the tree (`config show` has none of them)."""
    return {"gateway.host": (getattr(args, "host", None), "--host"),
            "gateway.port": (getattr(args, "port", None), "--port"),
            "gateway.instance_id": (getattr(args, "instance_id", None), "--instance-id")}


def build_config(args: argparse.Namespace):
    """The GatewayConfig the options, the environment and the config file give."""
    return load_from_args(args, gateway_options(args)).settings.gateway


def run(args: argparse.Namespace) -> int:
    # uvicorn and FastAPI load here, not at module level: other commands should not pay for them.
    import uvicorn

    from modelevents.services.gateway.app import create_app
    from modelevents.services.kafka import topics

    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(args.loglevel.upper())  # json mode: basicConfig did nothing
    config = build_config(args)
    run_async(topics.verify_topics(config.kafka))
    app = create_app(config)
    app.freeze_after_startup = True
    base = f"http://{config.host}:{config.port}"
    secrets = {name: sorted(p.webhook_secrets) for name, p in config.providers.items()
               if p.webhook_secrets}
    log.info("gateway on %s → Kafka %s, topics %sframes", base, config.kafka.bootstrap_servers,
             config.kafka.topic_prefix)
    log.info("webhooks: %s", ", ".join(f"{base}/webhooks/{name} (tenants: {', '.join(t)})"
                                       for name, t in secrets.items())
             or "none configured (set OPENAI_WEBHOOK_SECRET / GEMINI_WEBHOOK_SECRET or --config)")
    keyed = [name for name, p in config.providers.items() if p.api_key is not None]
    log.info("runs: POST %s/v1/runs (providers with an API key: %s)", base,
             ", ".join(keyed) or "none: set OPENAI_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY")
    log.info("forwarded streams: POST %s/v1/runs/{run_id}/frames?api=…; health %s/healthz, "
             "%s/readyz; API docs %s/docs; the operator's page %s/ui", base, base, base, base,
             base)
    # Access logs off: one line per webhook is noise at thousands per second; refusals are
    # logged by the routes with their reason.
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port,
                                           log_level=args.loglevel, access_log=False,
                                           log_config=logs.uvicorn_log_config(),
                                           proxy_headers=False,
                                           # Open SSE followers must not hold a stop up for ever.
                                           timeout_graceful_shutdown=10,
                                           lifespan="on", **app.server_options))
    # uvicorn stops gracefully on SIGTERM/SIGINT, then re-raises the signal through the handler
    # that was in place before it started. A stop is this command's normal end (exit 0): the
    # handlers it finds do nothing.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    if not server.started:
        return 1  # the startup failed (uvicorn logged why)
    log.info("gateway stopped")
    return 0
