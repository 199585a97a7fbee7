"""``modelevents`` with the gateway's followers traced, for bench/ui.py's breakdown of the latency.

    python bench/traced_gateway.py gateway --port … (the CLI's arguments)

Writes one line per event and stage to ``$MODELEVENTS_BENCH_TRACE``: ``got <run> <seq> <ms>``
when the gateway's tail of ``events`` decoded the record (services/gateway/events/tail.py), and
``sse <run> <seq> <ms>`` when a follower's stream handed the event's SSE bytes to the server to
write (services/gateway/events/followers.py; once per follower). Epoch ms of this machine's clock, as
bench/ui.py's. Only the bench runs the gateway this way: the product has no tracing hooks.
"""

from __future__ import annotations

import os
import sys
import time

from modelevents.services.cli.main import main
from modelevents.services.gateway.events import followers
from modelevents.services.gateway.events import tail as events_tail
from modelevents.services.kafka import clients

trace = open(os.environ["MODELEVENTS_BENCH_TRACE"], "w", buffering=1)
decode = clients.decode_record


class _TracedClients:
    """events_tail's ``clients`` with its decode_record noting each event it decodes."""

    def __getattr__(self, name: str):
        return getattr(clients, name)

    @staticmethod
    def decode_record(message):
        record = decode(message)
        value = record.value
        if getattr(value, "seq", None) is not None:
            trace.write(f"got {value.run_id} {value.seq} {time.time() * 1000:.1f}\n")
        return record


events_tail.clients = _TracedClients()  # type: ignore[assignment]
follow = followers.RunFollowers.follow


async def traced_follow(self, run_id, tenant, after_seq=-1):
    async for chunk in follow(self, run_id, tenant, after_seq):
        if chunk.startswith(b"id: "):
            seq = chunk[4:chunk.index(b"\n")].decode()
            trace.write(f"sse {run_id} {seq} {time.time() * 1000:.1f}\n")
        yield chunk


followers.RunFollowers.follow = traced_follow  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
