"""UnthreadedProducerBuffer (services/processor/faust/transport.py): the producer buffer's size
and ``put`` go to its pending queue, without reading the app's settings. The rest of the module
runs only inside a worker: tests/integration/processor/test_processor.py and test_broker_restart.py."""

from __future__ import annotations

from modelevents.services.processor.faust.transport import UnthreadedProducerBuffer


def test_the_buffer_counts_and_queues_without_the_app() -> None:
    buffer = UnthreadedProducerBuffer()  # no app attached: a settings lookup would fail
    assert buffer.size == 0
    buffer.put("first")
    buffer.put("second")
    assert buffer.size == 2
    assert [buffer.pending.get_nowait(), buffer.pending.get_nowait()] == ["first", "second"]
