"""The gateway's read side: what it reads from Kafka to answer about runs.

* ``topic_view.py`` — a whole topic kept in memory: read from its start, then followed
* ``run_states.py`` — the latest ``RunState`` of each run (the ``runs`` topic)
* ``owners.py``     — which tenant owns a run id (``run-owners``: one claim per id)
* ``reads.py``      — one run's ModelEvents of one tenant, each ``seq`` once, in order
* ``tail.py``       — one consumer of ``events`` for every run followed live
* ``followers.py``  — the followers of a run share one reader; the SSE encoding of an event
"""
