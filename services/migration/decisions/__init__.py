"""Decision records: which bundle was chosen, on what evidence, and the retest triggers that
demote the decision to historical evidence (docs/migration.md, "Decision records and retest
triggers").

    record.py        the Avro record (schemas/avro/migration/decision.avsc) and its codec
    triggers.py      the retest triggers a bundle implies, and the event schema's name@version
    eval_results.py  the fields of an eval result a decision reads (topic or JSON file)
    store.py         the decisions topic: publish a revision, read the latest of each
    markdown.py      the Markdown file with YAML front matter `decide --out` writes
    make.py          a new decision from a bundle and eval results; its demoted revision
"""
