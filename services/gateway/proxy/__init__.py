"""The drop-in proxy: provider-native routes whose frames are teed to Kafka without the client
waiting for it.

* ``tee.py``      — ``FrameTee``: what the routes offer frames to
* ``journal.py``  — the gateway's tee: frames to Kafka, to a local journal while Kafka is away
* ``segments.py`` — the journal's files (an append-only log with a checksum per record)
"""
