"""The eval: a versioned corpus of tasks run under bundles, each run's evidence read from the
topics, the hard gates first, then a paired comparison of accepted runs only.

    corpus.py     the corpus directory format and its loader (``--corpus example`` ships here)
    evidence.py   one run's evidence: its events, state, input packet and receipts
    gates.py      the five hard gates, each verdict with its evidence
    checkers.py   whether a run did its task (the task's checker)
    prices.py     the price table: unit cost per model snapshot
    compare.py    per-bundle figures over accepted runs, paired by task, bootstrap intervals
    result.py     the result record (Avro, topic ``eval-results``, JSON)
    scoring.py    evidence → scored runs → a result
"""
