"""The decision pages name the retest triggers in the decisions' own order
(``static/decisions.js``'s ``TRIGGERS`` against ``schemas/decision_record.py``): a
trigger added there is a row of the page's triggers table here."""

from __future__ import annotations

import re

from modelevents.schemas.decision_record import TRIGGERS
from tests.paths import REPO_ROOT

DECISIONS_JS = REPO_ROOT / "services" / "gateway" / "static" / "decisions.js"


def test_the_page_lists_the_triggers_of_the_decisions_in_their_order() -> None:
    found = re.search(r"export const TRIGGERS = [^\[]*\[(.*?)\]\);", DECISIONS_JS.read_text(),
                      re.DOTALL)
    assert found, "decisions.js has no TRIGGERS"
    assert tuple(re.findall(r'\["([a-z_]+)",', found.group(1))) == TRIGGERS
