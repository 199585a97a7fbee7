"""What enters the gateway besides its own calls, and how it is kept: input packets, forwarded
bodies, webhook deliveries.

* ``packets.py``        — input packets on ``run-inputs``: built, redacted, read back
* ``redaction.py``      — the redaction policy applied to a packet before it is written
* ``forwarded.py``      — writing a forwarded body's frames, and the answer when not all were
* ``deliveries.py``     — webhook deliveries in single flight, per webhook-id
* ``webhook_limits.py`` — how large a webhook delivery may be so that its frame fits a record

These modules import nothing of the gateway above ``errors.py``: the gateway's ``config.py``
composes the redaction policy and the webhook body limit defined here.
"""
