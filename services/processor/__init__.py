"""The stream processor: the Faust app that turns provider frames into ordered events and run
state (``app``: its topology, tables and agents), with its table values (``table_values``,
``plain_state``), its ordered output (``outbox``), what it needs of faust-streaming beyond the
public API (``faust``, by concern) and its health endpoint (``health``).

Importing this package imports faust; the gateway and the consumers use ``run_logic`` instead.
"""

from modelevents.services.processor.app import (
    ProcessorTuning,
    create_app,
    prepare_topics,
    stats_of,
)

__all__ = ["ProcessorTuning", "create_app", "prepare_topics", "stats_of"]
