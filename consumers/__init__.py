"""Consumers of the pipeline's topics. The public consumer API (``consumers/client.py``)::

    from modelevents.consumers import subscribe, follow_run
"""

from modelevents.consumers.client import (
    ElidedRebuilder,
    StartAt,
    Stats,
    Subscription,
    at_offset,
    at_time,
    follow_run,
    rebuild_elided,
    subscribe,
)

__all__ = ["subscribe", "follow_run", "Subscription", "Stats", "StartAt", "at_offset", "at_time",
           "rebuild_elided", "ElidedRebuilder"]
