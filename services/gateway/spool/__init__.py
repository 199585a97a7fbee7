"""Frames the drop-in proxy passed to its clients, on their way to Kafka without the client
waiting: to Kafka at once, or to a local journal while Kafka is away.

* ``tee.py``      — ``FrameTee``: what the proxy offers frames to
* ``journal.py``  — the gateway's tee (``JournalTee``): to Kafka, to the journal meanwhile
* ``segments.py`` — the journal's files (an append-only log with a checksum per record)
"""
