"""Where the tests' files are, computed once from the repository root.

Every test reaches a fixture, an expected-events file, a snapshot or a shared sample through
these names, never by climbing from its own location (``Path(__file__).parents[N]``), so moving
a test file to another folder never changes what it reads. (Files only one test reads and that
sit in its own folder — ``Path(__file__).parent / "samples"`` — move with it.)

- ``FIXTURES``: the project's own recordings, ``tests/fixtures/<api>/<file>`` (also read by the
  simulator, ``modelevents conformance`` and the benches).
- ``EXPECTED``: their expected events, ``tests/expected/<api>/<file>.expected.jsonl`` — the
  conformance suite's files, which are also the adapter tests' snapshots of those recordings.
- ``ADAPTER_SNAPSHOTS``, ``CONFORMANCE_SNAPSHOTS``: every other reviewed snapshot, beside the
  tests that own it, ``<folder>/<api>/<what>.jsonl`` (see tests/snapshots.py).
- ``SCHEMA_SAMPLES``: encoded records of each released schema version, one folder per version.
- ``LEGACY_VALUES``: worker table values written by the last version that pickled them.
- ``INJECTION_CORPUS``: texts labelled injection or benign (services/policy/injection.py's
  test and bench/injection.py).
- ``CORPUS_DIR``: the recorded provider corpus beside the repository (see tests/corpus.py).
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = REPO_ROOT / "tests"
FIXTURES = TESTS_DIR / "fixtures"
EXPECTED = TESTS_DIR / "expected"
ADAPTER_SNAPSHOTS = TESTS_DIR / "adapters" / "snapshots"
CONFORMANCE_SNAPSHOTS = TESTS_DIR / "conformance" / "snapshots"
SCHEMA_SAMPLES = TESTS_DIR / "schemas" / "samples"
LEGACY_VALUES = TESTS_DIR / "services" / "processor" / "legacy_values"
INJECTION_CORPUS = TESTS_DIR / "services" / "policy" / "injection_corpus.yaml"
CORPUS_DIR = (REPO_ROOT.parent / "shared" / "fixtures").resolve()
