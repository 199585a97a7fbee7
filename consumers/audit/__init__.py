"""The audit archive (``modelevents audit``; ``docs/audit.md``): an append-only, SHA-256-chained
copy of ``events``, the runs' input packets, the tool executor's receipts and optionally
``frames``, that proves itself. One module per concern:

* ``format.py``   — the on-disk format: container files, manifests, checkpoints, codecs, findings
* ``writer.py``   — ``audit run``: consume the topics into the archive (blocks, manifests,
  checkpoints, commits, recovery of a crashed run)
* ``verify.py``   — ``audit verify``: the checks (files, chain, records, runs, envelopes, frames)
  and the report; it calls the modules below for the other concerns
* ``inputs.py``   — verify's input-packet check (every gateway run has its packet)
* ``receipts.py`` — verify's receipts check (every executed tool result has its receipt)
* ``offsets.py``  — verify's offset-holes check (no record missing inside an archived partition)
* ``anchor.py``   — verify against the heads kept outside the archive (signed head, head hash,
  copied digests)
* ``heads.py``    — the signed heads the writer publishes at every checkpoint (digest files and
  the ``audit-heads`` topic)
* ``signing.py``  — the Ed25519 keys and signatures of those heads
* ``export.py``   — ``audit export``: the archive as JSON lines or Parquet
"""
