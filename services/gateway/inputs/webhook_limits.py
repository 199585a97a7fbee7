"""How large a webhook delivery may be so that its frame is one record Kafka takes.

A delivery answered 503 because its frame is larger than a record can be would be retried by the
provider for days and never succeed. So the gateway bounds everything a webhook frame holds: the
body by ``max_body_bytes`` (at most :data:`WEBHOOK_BODY_FIT`, a config error above), the
webhook-id and run key by the id rule (``schemas/ids.py``), the tenant likewise (config), and the
other values a frame keeps by :data:`KEPT_VALUE_CAPS` (a longer one is refused with 431 before
any signature work). :data:`WEBHOOK_BODY_FIT` is measured, not estimated: the encoded size of the
largest such frame with an empty body, taken from MAX_RECORD_BYTES, so a schema change moves it.
"""

from __future__ import annotations

from modelevents.schemas import codec
from modelevents.schemas.frames import FramePiece, ProviderFrame
from modelevents.schemas.ids import MAX_ID_LENGTH
from modelevents.schemas.limits import MAX_RECORD_BYTES

__all__ = ["KEPT_VALUE_CAPS", "WEBHOOK_BODY_FIT", "webhook_frame_overhead"]

# Characters of each value a webhook frame keeps besides the ids (ids are at most MAX_ID_LENGTH).
# Far above what OpenAI and Gemini send (a signature is 51 characters per secret in rotation).
KEPT_VALUE_CAPS: dict[str, int] = {
    "webhook-timestamp": 32, "webhook-signature": 4096, "user-agent": 512, "content-type": 256}

# Headers decode as latin-1, so a character may take two bytes in the frame's UTF-8.
_WIDE = "\u00e9"
# A body's length prefix: an Avro varint, one byte for an empty body, at most 5 for any int.
_LENGTH_PREFIX_SLACK = 4


def webhook_frame_overhead() -> int:
    """Encoded bytes of the largest webhook frame the gateway can build, less its body."""
    longest_id = "i" * MAX_ID_LENGTH
    headers = {name: _WIDE * KEPT_VALUE_CAPS.get(name, MAX_ID_LENGTH)
               for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "user-agent")}
    worst = ProviderFrame(
        frame_id=longest_id, run_key=longest_id, provider="openai", api="gemini-interactions",
        transport="webhook", received_at=2**62, body=b"", tenant=longest_id,
        content_type=_WIDE * KEPT_VALUE_CAPS["content-type"], headers=headers,
        piece=FramePiece(2**31 - 1, 2**31 - 1))
    return len(codec.encode(worst)) + _LENGTH_PREFIX_SLACK


# The largest webhook body whose frame stays within MAX_RECORD_BYTES whatever else it holds.
WEBHOOK_BODY_FIT = MAX_RECORD_BYTES - webhook_frame_overhead()
