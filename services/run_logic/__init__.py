"""One run's logic without Kafka, shared by the stream processor, the gateway and replay:

- ``normalizer``: a run's frames in, candidate ModelEvents out (the run's adapters);
- ``sequencer``: candidate events in, deduplicated events numbered by ``seq`` out;
- ``run_machine``: ordered events in, the run's RunState out;
- ``executor_events``: the events the tool executor and the gateway write to ``ingest``
  (tool results, approvals requested and resolved).
"""
