"""``modelevents capabilities probe``: check what the capability manifest claims for a target.

For each capability the manifest claims for ``--target provider/api/model``, one minimal request
(small ``max_output_tokens``) goes through the gateway (``POST /v1/runs``); what the run's events
show confirms, contradicts or leaves the claim inconclusive. The count of requests is printed
before any is sent. The record goes to the ``capability-probes`` topic (Avro, key probe id) and
as JSON to stdout (``--json``) or a file (``--out``). Exit 0: nothing contradicted; 1: a claim was
contradicted; 2: bad input (a malformed target, one the manifest does not know, a gateway that
cannot be reached).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    positive_int,
    run_async,
    settings_from_args,
)

DEFAULT_GATEWAY = "http://127.0.0.1:8080"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capabilities", help="check the capability manifest's claims against "
                                            "what a provider actually does")
    commands = p.add_subparsers(dest="capabilities_command", metavar="ACTION", required=True)
    probe = commands.add_parser(
        "probe", help="send one minimal request per claimed capability through the gateway "
                      "and record what was observed",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", "`"),
        epilog=ENV_HELP)
    probe.add_argument("--target", required=True, metavar="PROVIDER/API/MODEL",
                       help="what to probe, e.g. openai/openai-responses/gpt-4.1-mini")
    probe.add_argument("--gateway", metavar="URL", default=DEFAULT_GATEWAY,
                       help="the gateway the requests go through (default: %(default)s)")
    probe.add_argument("--json", action="store_true",
                       help="print the record as JSON instead of a table")
    probe.add_argument("--out", type=Path, metavar="FILE",
                       help="also write the record as JSON to FILE")
    probe.add_argument("--manifest", type=Path, metavar="FILE", default=None,
                       help="the capability manifest whose claims are probed (default: the "
                            "shipped one, as the gateway uses)")
    probe.add_argument("--max-output-tokens", type=positive_int, default=64, metavar="N",
                       help="max_output_tokens of each request (default: %(default)s)")
    probe.add_argument("--timeout", type=positive_float, default=60.0, metavar="S",
                       help="how long each run may take to settle (default: %(default)s)")
    probe.add_argument("--account", default=None,
                       help="the provider account (organization/project) the gateway calls "
                            "with, recorded with the observations")
    probe.add_argument("--region", default=None,
                       help="the provider region or endpoint location, recorded likewise")
    probe.add_argument("--no-publish", action="store_true",
                       help="do not write the record to the capability-probes topic")
    add_kafka_options(probe)
    probe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from modelevents.services.gateway.calls.capabilities import load_manifest
    from modelevents.services.migration.probes.client import GatewayClient
    from modelevents.services.migration.probes.requests import plan
    from modelevents.services.migration.probes.runner import (
        publish,
        resolve_target,
        run_probes,
    )

    manifest = load_manifest(args.manifest) if args.manifest else load_manifest()
    resolved = resolve_target(args.target, manifest)
    settings = None if args.no_publish else settings_from_args(args)
    probes = plan(resolved, args.max_output_tokens, f"probe-{secrets.token_hex(6)}")
    client = GatewayClient(args.gateway, timeout_s=args.timeout)
    try:
        client.check()
        sending = sum(p.request is not None for p in probes)
        _say(f"probing {args.target} through {client.url}: {sending} requests "
             f"(max_output_tokens {args.max_output_tokens}) for {len(probes)} claimed "
             "capabilities")
        record = run_probes(resolved, probes, client, account=args.account,
                            region=args.region, said=lambda line: _say(f"  {line}"))
    finally:
        client.close()
    doc = record.as_json()
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        _table(doc)
    if settings is not None:
        run_async(publish(record, settings))
        _say(f"record {record.probe_id} written to {settings.topic('capability-probes')}")
    return 1 if record.contradicted else 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _table(doc: dict) -> None:
    print(f"probe {doc['probe_id']}")
    print(f"target {doc['provider']}/{doc['api']}/{doc['model']}  snapshots "
          f"{', '.join(doc['model_snapshots']) or '-'}  api revision {doc['api_revision'] or '-'}"
          f"  account {doc['account'] or '-'}  region {doc['region'] or '-'}")
    print(f"{doc['probed_at_iso']}  {doc['requests_sent']} requests through {doc['gateway']}")
    width = max(len(o["capability"]) for o in doc["observations"])
    for o in doc["observations"]:
        print(f"  {o['capability']:<{width}}  {o['observed']:<12}  {o['evidence']}"
              + (f" — {o['error']}" if o["error"] else "")
              + (f"  [{o['run_id']}]" if o["run_id"] else ""))
