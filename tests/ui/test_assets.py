"""The page's modules as the gateway serves them: every script in ``static/`` is an asset of
``/ui`` (a module left out would be a 404 in the browser), and every import between them names
one."""

from __future__ import annotations

import re

from modelevents.services.gateway.routes.ui import ASSETS
from tests.paths import REPO_ROOT

STATIC = REPO_ROOT / "services" / "gateway" / "static"
IMPORT = re.compile(r"""^\s*import\s[^"']*["']([^"']+)["'];""", re.MULTILINE)


def test_every_file_of_the_page_is_served() -> None:
    files = {str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file()}
    assert files == set(ASSETS)


def test_every_import_of_a_module_is_a_served_asset() -> None:
    for name in ASSETS:
        if not name.endswith(".js"):
            continue
        module = STATIC / name
        for specifier in IMPORT.findall(module.read_text()):
            assert specifier.startswith("./") or specifier.startswith("../"), (name, specifier)
            target = (module.parent / specifier).resolve().relative_to(STATIC)
            assert str(target) in ASSETS, (name, specifier)
