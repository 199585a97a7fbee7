"""The adapters' errors: the caller's mistakes the adapters refuse (an input past a limit, a
neutral request the target API cannot carry, an API name no adapter serves), under
``InputError`` of the one error tree drawn in docs/errors.md.

Adapters never raise for what a provider sends (malformed or unknown frames become ``error``
and ``unknown`` events): these are for inputs and requests a caller gave.
"""

from __future__ import annotations

from modelevents.adapters.limits import OPTIONS, current_source
from modelevents.schemas.errors import DetectionError, InputError

__all__ = ["InputLimitError", "RenderError", "UnknownApi"]


class InputLimitError(InputError):
    """Reading the input would pass one of the :class:`~modelevents.adapters.limits.InputLimits`."""

    def __init__(self, what: str, limit: str, *, value: int, source: str | None = None) -> None:
        self.what = what  # what passed the limit, e.g. "interaction 2's gzip body"
        self.limit = limit  # the InputLimits field
        self.value = value  # the limit in effect
        self.source = source if source is not None else current_source()
        super().__init__(str(self))

    def __str__(self) -> str:
        unit = "" if self.limit in ("max_ratio", "max_yaml_alias_nodes") else " bytes"
        where = self.source or "the input"
        return (f"{where}: {self.what}: over the limit {self.limit}={self.value:,}{unit}; "
                f"if the input is trusted, raise it with {OPTIONS[self.limit]}")


class RenderError(InputError):
    """The neutral request holds something the target API cannot carry; says what to change."""


class UnknownApi(DetectionError):
    """A provider API name that no adapter is registered for; the message lists the known ones."""
