"""A whole probe of one target: resolve it in the manifest, send its probes, make the record.

    resolved = resolve_target("openai/openai-responses/gpt-4.1-mini", manifest)
    probes = plan(resolved, max_output_tokens=64, run_prefix=…)      # requests.py
    record = run_probes(resolved, probes, client, gateway=…, …)       # one request each
    await publish(record, settings)                                   # capability-probes topic

Nothing is sent for a target the manifest does not know (ProbeError, with what it does know).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from modelevents.adapters.requests.anthropic_messages import ANTHROPIC_VERSION
from modelevents.adapters.requests.gemini_interactions import API_REVISION
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.transcript import APIS
from modelevents.services.errors import ProbeError
from modelevents.services.gateway.calls.capabilities import Manifest, Resolved
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.probes import record as rec
from modelevents.services.migration.probes.client import GatewayClient
from modelevents.services.migration.probes.observe import judge
from modelevents.services.migration.probes.requests import Probe

__all__ = ["resolve_target", "run_probes", "publish"]

# The API revision each request adapter sends (its version header); OpenAI's APIs have none.
API_REVISIONS = {"anthropic-messages": ANTHROPIC_VERSION, "gemini-interactions": API_REVISION}


def resolve_target(text: str, manifest: Manifest) -> Resolved:
    """``provider/api/model`` (the model may hold slashes) → the manifest's entry for it."""
    provider, api, model = (text.split("/", 2) + ["", ""])[:3]
    if not (provider and api and model):
        raise ProbeError(f"target {text!r} is not provider/api/model (e.g. "
                         "openai/openai-responses/gpt-4.1-mini)")
    if api not in APIS:
        raise ProbeError(f"target {text!r}: unknown API {api!r}; known: {', '.join(APIS)}")
    apis = manifest.apis_of(provider)
    if not apis:
        raise ProbeError(f"target {text!r}: provider {provider!r} is not in the capability "
                         f"manifest {manifest.source}; it knows {', '.join(manifest.providers())}")
    if api not in apis:
        raise ProbeError(f"target {text!r}: the manifest has no {api} for {provider}; it has "
                         f"{', '.join(apis)}")
    resolved = manifest.lookup(provider, api, model)
    if resolved is None:
        raise ProbeError(f"target {text!r}: no model entry of {provider}/{api} in "
                         f"{manifest.source} matches {model!r}, so it claims nothing to probe; "
                         "add the model to the manifest")
    return resolved


def run_probes(resolved: Resolved, probes: list[Probe], client: GatewayClient, *,
               account: str | None = None, region: str | None = None,
               said: Callable[[str], None] = lambda _: None) -> rec.CapabilityProbe:
    """Send each probe's request in turn and judge it; the record, with its id."""
    probed_at = int(time.time() * 1000)
    observations = []
    for probe in probes:
        if probe.request is None:
            observations.append(rec.CapabilityObservation(
                probe.capability, True, "inconclusive", f"not probed: {probe.reason}"))
            said(f"{probe.capability}: not probed ({probe.reason})")
            continue
        observation = judge(probe.capability, client.send(probe.request))
        observations.append(observation)
        said(f"{probe.capability}: {observation.observed} — {observation.evidence}")
    snapshots = sorted({o.model_snapshot for o in observations if o.model_snapshot})
    entry = orjson.dumps(resolved.capabilities.model_dump(mode="json"),
                         option=orjson.OPT_SORT_KEYS).decode()
    return rec.CapabilityProbe(
        provider=resolved.provider, api=resolved.api, model=resolved.model, gateway=client.url,
        manifest_entry=entry, probed_at=probed_at,
        requests_sent=sum(p.request is not None for p in probes), observations=observations,
        model_snapshots=snapshots, api_revision=API_REVISIONS.get(resolved.api),
        account=account, region=region).with_id()


async def publish(record: rec.CapabilityProbe, settings: PipelineSettings) -> None:
    """Write the record on ``<prefix>capability-probes`` (key probe_id), acknowledged."""
    topic = clients.topic_name(settings, rec.TOPIC)
    # Without the topic the producer would wait out its metadata timeout to say so.
    admin = await clients.start_client(clients.make_admin(settings), settings)
    try:
        exists = topic in await admin.list_topics()
    finally:
        await admin.close()
    if not exists:
        raise ConfigError(f"topic {topic} does not exist on {settings.bootstrap_servers}; "
                          f"create it with `modelevents topics create --prefix "
                          f"{settings.topic_prefix}` (the record above is not lost: pass --out)")
    producer = await clients.start_producer(settings)
    try:
        await producer.send_and_wait(topic, key=record.probe_id.encode(),
                                     value=rec.encode(record))
    finally:
        await producer.stop()
