"""Domain names as hosted-tool rules use them: one spelling, and "a domain covers its subdomains".

A rule is a bare host name (``docs.python.org``), never a URL: every provider API that filters a
hosted web search or fetch by domain takes host names, and a domain covers its subdomains there
(OpenAI's ``filters.allowed_domains``, Claude's ``allowed_domains`` / ``blocked_domains``). The
request (``schemas/transcript.py``), the renderers and the tenant policy
(``services/policy/hosted.py``) all compare names through ``normalize_domain``: lower case, no
trailing dot, internationalized names in their ASCII (IDNA) form — so ``Bücher.Example.`` and
``xn--bcher-kva.example`` are one rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["covered", "normalize_domain"]

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def normalize_domain(value: str) -> str:
    """``value`` as a rule: lower-case ASCII host name. Raises ValueError saying what is wrong."""
    text = value.strip().rstrip(".")
    if not text:
        raise ValueError("a domain is empty")
    if "://" in text or any(c in text for c in "/:?#@ *"):
        raise ValueError(f"{value!r} is not a bare domain: give the host name only (no scheme, "
                         "path, port or wildcard — a domain already covers its subdomains), "
                         "e.g. 'docs.python.org'")
    try:
        ascii_name = text.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"{value!r} is not a valid domain name (IDNA)") from None
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{value!r} is not a valid domain name: dot-separated labels of "
                         "letters, digits and inner hyphens")
    return ascii_name


def covered(host: str, rules: Iterable[str]) -> bool:
    """Is ``host`` one of ``rules`` or a subdomain of one? (Both already normalized.)"""
    return any(host == rule or host.endswith("." + rule) for rule in rules)
