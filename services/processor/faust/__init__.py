"""The one place that reaches into Faust: what the worker needs from faust-streaming 0.15.3 beyond
its public API, each module named by what it is and reaching in only as far as it needs.

- :mod:`.tables`: the run table (changelog partition by key, its memory store set directly) and
  the agents' topic schema of raw bytes;
- :mod:`.ordering`: each source partition processed in offset order without holes;
- :mod:`.recovery`: a stalled table recovery helped along;
- :mod:`.transport`: the consumer, its thread and the producer, batches to agents;
- :mod:`.monitor`: Faust's monitor without its per-record statistics.

The private parts reached (a store's ``_key_partition``, the consumer's unacked set and committed
offsets, the table manager's recovery, the conductor's index) belong to Faust's concrete classes,
not to the interfaces it types app, table and consumer with: they are read through names typed
Any. A newer faust-streaming may make some of this unnecessary; the processor's rebalance and
SIGKILL tests say whether it still holds.
"""
