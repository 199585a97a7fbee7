"""``modelevents ui``: the operator's page — which is the gateway's ``/ui``.

The page is static files the gateway serves (``services/gateway/routes/ui.py``); there is no UI server
of its own. So this command does one of two honest things:

- without ``--gateway``: it starts the gateway, exactly as ``modelevents gateway`` with the same
  options (topics verified first; a worker must run beside it for runs to have states and
  events), and prints the page's URL;
- with ``--gateway URL``: it checks that the gateway there serves the page (``GET URL/ui``) and
  prints its URL, starting nothing.
"""

from __future__ import annotations

import argparse
import sys

from modelevents.services.cli.commands import gateway
from modelevents.services.cli.kafka_options import ENV_HELP

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        help="the operator's page (runs, one run live): start the gateway with /ui, or print "
             "its URL",
        description="The operator's page is served by the gateway at /ui (static files of the "
                    "package: no build step, nothing from the internet). Without --gateway this "
                    "starts the gateway, as `modelevents gateway` with the same options, and "
                    "prints the page's URL; with --gateway URL it checks that gateway serves "
                    "the page and prints the URL. A worker must run for runs to show. With "
                    "api_tokens configured, type a token into the page: it shows that tenant's "
                    "runs only.",
        epilog=ENV_HELP)
    gateway.add_gateway_options(p)
    p.add_argument("--gateway", default=None, metavar="URL",
                   help="a running gateway (e.g. http://127.0.0.1:8080): print its page's URL, "
                        "start nothing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.gateway:
        import httpx

        url = args.gateway.rstrip("/") + "/ui"
        try:
            answer = httpx.get(url, timeout=10)
        except httpx.HTTPError as exc:
            print(f"modelevents: error: no gateway answers at {args.gateway} ({exc}); start one "
                  "with `modelevents ui` or `modelevents gateway`", file=sys.stderr)
            return 2
        if answer.status_code != 200 or "modelevents" not in answer.text:
            print(f"modelevents: error: {url} answered {answer.status_code}, not the page; is "
                  "it a modelevents gateway of this version?", file=sys.stderr)
            return 2
        print(url)
        return 0
    config = gateway.build_config(args)
    print(f"the operator's page: http://{config.host}:{config.port}/ui "
          "(the gateway starts now; Ctrl-C stops it)", flush=True)
    return gateway.run(args)
