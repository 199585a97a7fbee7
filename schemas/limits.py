"""Size limits every record the project writes to Kafka keeps.

Kafka refuses a record batch larger than the topic's ``max.message.bytes`` (broker default
1,048,588 bytes) and aiokafka refuses, before sending, a record larger than the producer's
``max_request_size`` (1,048,576). A record that cannot be written is a batch that can never be
committed, so nothing the project writes may come near either: every value stays at or below
:data:`MAX_RECORD_BYTES`, which leaves room for the key, the headers and the record batch's own
overhead. What would be larger travels in pieces (``docs``: "How big payloads travel").
"""

from __future__ import annotations

__all__ = ["MAX_RECORD_BYTES", "PIECE_BYTES"]

# The largest record value (encoded bytes) the project writes to any topic.
MAX_RECORD_BYTES = 1_000_000
# The budget of the variable part (text, arguments, data, envelope body) of one piece of an event
# or frame that is cut into pieces; the rest of the record (ids, names, small fields) fits in the
# difference to MAX_RECORD_BYTES.
PIECE_BYTES = 768 * 1024
