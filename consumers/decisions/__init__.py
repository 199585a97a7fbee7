"""The decisions watcher: demotes a decision record to historical evidence when live traffic
stops matching it (docs/migration.md, "Decision records and retest triggers").

    checks.py   which decision a run falls under; which trigger a record fires (no Kafka)
    watcher.py  the live loop over events, runs, receipts and decisions; writes demotions
    metrics.py  the Prometheus gauge and counter
"""
