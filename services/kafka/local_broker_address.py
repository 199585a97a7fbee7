"""Where Kafka is when nothing says: the project's own local broker.

services/local/kafka_broker.py starts that broker reading these same names, and the ``kafka``
section (services/kafka/config.py) falls back to it, so that a pipeline and
``modelevents kafka start`` agree.
"""

from __future__ import annotations

ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
ENV_LOCAL_PORT = "MODELEVENTS_KAFKA_PORT"
LOCAL_HOST = "127.0.0.1"
LOCAL_PORT = 9092
