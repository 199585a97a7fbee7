"""The eval pages name the hard gates in the eval's own order (``static/evals.js``'s ``GATES``
against ``services/migration/eval/gates.py``): a gate added there is a column of the gates
table here."""

from __future__ import annotations

import re

from modelevents.services.migration.eval.gates import GATES
from tests.paths import REPO_ROOT

EVALS_JS = REPO_ROOT / "services" / "gateway" / "static" / "evals.js"


def test_the_page_lists_the_gates_of_the_eval_in_its_order() -> None:
    found = re.search(r"export const GATES = \[([^\]]*)\]", EVALS_JS.read_text())
    assert found, "evals.js has no GATES"
    assert tuple(re.findall(r'"([a-z_]+)"', found.group(1))) == GATES
