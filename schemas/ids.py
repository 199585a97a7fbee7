"""What a run id (and any other id a caller names: a stream id, a webhook id) may be.

A run id is a Kafka key, a log field, a URL path segment and a file name in exports: it must
survive all of them unchanged. So: 1 to 200 characters of ASCII letters, digits and ``._:-``
(provider object ids such as ``resp_…``, ``msg_…``, ``v1_…`` and the gateway's ``run_…`` are all
of that shape). Anything else — CR, LF or NUL that forge log lines, ``/`` that changes a path,
spaces, non-ASCII look-alikes — is refused before anything is sent or written.
"""

from __future__ import annotations

import re
import secrets

from modelevents.schemas.errors import InvalidId

__all__ = ["MAX_ID_LENGTH", "MAX_PROVIDER_LENGTH", "InvalidId", "check_id", "check_provider",
           "is_valid_id", "new_call_tag", "CALL_TAG", "GATEWAY_FRAME_ID"]

MAX_ID_LENGTH = 200
_ID = re.compile(rf"[A-Za-z0-9._:\-]{{1,{MAX_ID_LENGTH}}}")


def is_valid_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def check_id(value: str, what: str = "run id") -> str:
    """``value`` when it is a valid id, else :class:`InvalidId` saying what is allowed."""
    if is_valid_id(value):
        return value
    shown = repr(value[:40]) + ("…" if len(value) > 40 else "")
    raise InvalidId(f"{what} {shown} is not valid: use 1 to {MAX_ID_LENGTH} characters of ASCII "
                    "letters, digits and . _ : -")


# A provider name a client gives (a forwarded stream's ``provider``: ``groq``, ``vllm``,
# ``azure-openai`` …) is a metrics label, a filter of the run list and a field of every event:
# one lowercase word, as the names the adapters and the manifest use.
MAX_PROVIDER_LENGTH = 64
_PROVIDER = re.compile(rf"[a-z][a-z0-9._\-]{{0,{MAX_PROVIDER_LENGTH - 1}}}")


def check_provider(value: str) -> str:
    """``value`` when it is a valid provider name, else :class:`InvalidId` saying what is
    allowed."""
    if _PROVIDER.fullmatch(value) is not None:
        return value
    shown = repr(value[:40]) + ("…" if len(value) > 40 else "")
    raise InvalidId(f"provider {shown} is not a provider name: use 1 to {MAX_PROVIDER_LENGTH} "
                    "lowercase ASCII letters, digits and . _ -, starting with a letter "
                    "(e.g. openai, groq, vllm)")


# The tag of a call the gateway makes (``LocalRuns.next_tag``, services/gateway/calls/in_flight.py): ``c``,
# the call's number in its run, ``-``, 8 random hex digits (another gateway process may make calls
# of the same run: frame ids must not collide). The ids of the call's frames are the tag, ``.``
# and the stream or poll id; ``audit verify`` tells a run the gateway started by that prefix
# (consumers/audit/inputs.py). One home for both, so the format cannot change under the audit.
CALL_TAG = re.compile(r"c\d+-[0-9a-f]{8}")
GATEWAY_FRAME_ID = re.compile(CALL_TAG.pattern + r"\.")


def new_call_tag(number: int) -> str:
    """A fresh tag for call ``number`` (0, 1, …) of a run: ``c0-1a2b3c4d``."""
    return f"c{number}-{secrets.token_hex(4)}"
