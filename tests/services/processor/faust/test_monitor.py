"""QuietMonitor (services/processor/faust/monitor.py): Faust's monitor, keeping none of the
statistics Faust's own keeps per record, table access and send."""

from __future__ import annotations

from types import SimpleNamespace

from faust.types import TP

from modelevents.services.processor.faust.monitor import QuietMonitor


def test_records_table_accesses_and_sends_leave_no_statistics() -> None:
    monitor = QuietMonitor()
    tp = TP("frames", 0)
    message = SimpleNamespace(time_in=None, time_out=None, time_total=None)
    monitor.on_message_in(tp, 1, message)
    monitor.on_stream_event_in(tp, 1, object(), object())
    monitor.on_stream_event_out(tp, 1, object(), object())
    monitor.on_message_out(tp, 1, message)
    monitor.on_table_get(object(), b"k")
    monitor.on_table_set(object(), b"k", b"v")
    monitor.on_table_del(object(), b"k")
    monitor.on_send_initiated(object(), "events", message, 1, 1)
    monitor.on_send_completed(object(), None, None)
    assert (monitor.messages_received_total, monitor.messages_active, monitor.events_total,
            monitor.messages_sent) == (0, 0, 0, 0)
    assert not monitor.messages_received_by_topic and not monitor.messages_sent_by_topic
    assert message.time_in is None
