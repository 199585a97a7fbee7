"""Replay and export (``modelevents replay``): the log read again, checked and carried elsewhere.
One module per concern:

* ``topic_snapshot.py`` — a bounded snapshot of a topic (from a start point to the end offsets
  seen when reading began), what the others read
* ``checks.py``         — ``replay state`` (run state rebuilt from ``events`` or an audit
  archive, compared with ``runs``) and ``replay parity`` (``frames`` re-normalized with today's
  adapters, compared with ``events``)
* ``export.py``         — ``replay export|import``: a run or a time range to an archive file and
  back onto the topics
* ``archive.py``        — that archive file: ModelEvents (and ProviderFrames) in a standard Avro
  object container file, written and read
"""
