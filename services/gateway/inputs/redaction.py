"""The redaction policy applied to an input packet before it is written.

    policy = RedactionConfig()                        # GatewayConfig.redaction (the default)
    redactor = Redactor(policy, secrets=["sk-live-…"])
    clean, count = redactor.redact(request_doc)       # a copy; the input is not changed
    redactor.record(count)                            # the policy as the packet records it

Three rules, in this order, over every JSON value of the request:

1. **fields** — an object key in the list (case-insensitive: ``api_key``, ``Authorization`` …)
   has its whole value replaced by ``[REDACTED:field]``, whatever it holds (a tool call's
   arguments, a JSON schema's example);
2. **secrets the gateway holds** — the providers' API keys, webhook secrets and bearer tokens of
   its config are never stored: any string containing one has it replaced by
   ``[REDACTED:secret]``; this rule is not configurable and is not listed in the policy (the
   list would be the secrets);
3. **patterns** — each match of a configured regular expression in any string (keys excepted)
   is replaced by ``[REDACTED:<pattern name>]``.

The provider request's headers (the API key, ``Authorization``) are never part of the packet at
all: the packet holds the neutral request, and the wire request is rendered from it only when
the call is sent. The policy in force (name, fields, patterns and their SHA-256) is recorded in
every packet, so a reader knows what may be missing from it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from modelevents.schemas.run_input import RedactionPattern, RedactionPolicy

__all__ = ["RedactionConfig", "Redactor", "DEFAULT_FIELDS", "DEFAULT_PATTERNS"]

DEFAULT_FIELDS = ["api_key", "apikey", "x-api-key", "x-goog-api-key", "authorization",
                  "password", "secret", "client_secret", "access_token", "refresh_token"]
# Credentials of the providers this gateway talks to, bearer tokens and e-mail addresses.
DEFAULT_PATTERNS = {
    "openai_key": r"\bsk-[A-Za-z0-9_\-]{16,}",
    "google_key": r"\bAIza[0-9A-Za-z_\-]{35}",
    "aws_access_key": r"\bAKIA[0-9A-Z]{16}\b",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9_.~+/=\-]{8,}",
    "webhook_secret": r"\bwhsec_[A-Za-z0-9+/=]{16,}",
    "email": r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}",
}
SECRET_MARK = "[REDACTED:secret]"
FIELD_MARK = "[REDACTED:field]"


class RedactionConfig(BaseModel):
    """``redaction:`` in the gateway config (see the module docstring)::

        redaction:
          name: acme-2026-12
          fields: [api_key, authorization, ssn]
          patterns: {email: '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}'}
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="default", min_length=1, max_length=128)
    fields: list[str] = Field(default_factory=lambda: list(DEFAULT_FIELDS))
    patterns: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_PATTERNS))

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for name, regex in value.items():
            try:
                compiled = re.compile(regex)
            except re.error as exc:
                raise ValueError(f"redaction pattern {name!r} ({regex!r}) is not a regular "
                                 f"expression: {exc}") from None
            if compiled.search(""):
                raise ValueError(f"redaction pattern {name!r} ({regex!r}) matches the empty "
                                 "string; it would mark every value")
        return value

    @property
    def fingerprint(self) -> str:
        canonical = orjson.dumps({"name": self.name, "fields": self.fields,
                                  "patterns": self.patterns}, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()


class Redactor:
    """Applies one :class:`RedactionConfig` and the gateway's own secrets to JSON documents."""

    def __init__(self, config: RedactionConfig, secrets: Iterable[str] = ()) -> None:
        self.config = config
        self._fields = {f.lower() for f in config.fields}
        self._patterns = [(re.compile(regex), f"[REDACTED:{name}]")
                          for name, regex in config.patterns.items()]
        # Longest first: a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def redact(self, doc: Any) -> tuple[Any, int]:
        """A redacted copy of ``doc`` (JSON values) and how many values were replaced."""
        count = [0]
        return self._value(doc, count), count[0]

    def record(self, redactions: int) -> RedactionPolicy:
        """The policy as a packet records it."""
        return RedactionPolicy(
            name=self.config.name, fields=list(self.config.fields),
            patterns=[RedactionPattern(n, r) for n, r in self.config.patterns.items()],
            fingerprint=self.config.fingerprint, redactions=redactions)

    def _value(self, value: Any, count: list[int]) -> Any:
        if isinstance(value, str):
            return self._string(value, count)
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if isinstance(key, str) and key.lower() in self._fields:
                    out[key] = FIELD_MARK
                    count[0] += 1
                else:
                    out[key] = self._value(item, count)
            return out
        if isinstance(value, list):
            return [self._value(item, count) for item in value]
        return value

    def _string(self, text: str, count: list[int]) -> str:
        for secret in self._secrets:
            if secret in text:
                count[0] += text.count(secret)
                text = text.replace(secret, SECRET_MARK)
        for pattern, mark in self._patterns:
            text, n = pattern.subn(mark, text)
            count[0] += n
        return text
