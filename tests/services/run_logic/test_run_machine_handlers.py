"""The run machine's dispatch table against the event contract.

The table hands each handler the event's payload typed as the record its kind carries; the type
checker cannot see that pairing through the table, so this test holds it to KIND_PAYLOAD.
"""

from __future__ import annotations

import typing

import pytest

from modelevents.schemas.events import KIND_PAYLOAD
from modelevents.services.run_logic import run_machine
from modelevents.services.run_logic.run_machine import _HANDLERS


@pytest.mark.parametrize("kind", sorted(_HANDLERS))
def test_each_handler_takes_the_payload_record_of_its_kind(kind: str) -> None:
    hints = typing.get_type_hints(_HANDLERS[kind], vars(run_machine))
    assert kind in KIND_PAYLOAD, f"{kind!r} has a handler but is no kind of the vocabulary"
    assert hints["payload"] is KIND_PAYLOAD[kind], (kind, hints["payload"])
