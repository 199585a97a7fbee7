"""Faust's monitor without its per-record statistics: :class:`QuietMonitor`.

Every faust-streaming 0.15.3 app has a ``faust.sensors.monitor.Monitor``: the consumer reports
commits and end offsets to it, and it keeps statistics at every record in and out, table access
and send, for Faust's web views, which the worker does not serve. Its hooks are the only way to
turn that bookkeeping off, so the worker's monitor is a subclass whose per-record hooks do
nothing.
"""

from __future__ import annotations

from typing import Any

from faust.sensors.monitor import Monitor

__all__ = ["QuietMonitor"]


class QuietMonitor(Monitor):
    """Faust's monitor (every app has one: the consumer reports commits and end offsets to it)
    without the statistics it keeps per record, per table access and per send.

    Those feed Faust's web views, which the worker does not serve (``web_enabled=False``), and
    cost the worker a few percent of its time at every record in and out.
    """

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        return None

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any,
                            state: Any = None) -> None:
        return None

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        return None

    def on_table_get(self, table: Any, key: Any) -> None:
        return None

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        return None

    def on_table_del(self, table: Any, key: Any) -> None:
        return None

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int,
                          valsize: int) -> None:
        return None

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        return None
