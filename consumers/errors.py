"""The consumers' errors (replay, the archive, the consumer API), under the branches of the one
error tree drawn in docs/errors.md.
"""

from __future__ import annotations

from modelevents.schemas.errors import ConfigError, InputError

__all__ = ["NoSuchRun", "EmptyRange", "ArchiveError", "AuditError", "MissingTopic"]


class NoSuchRun(InputError):
    """The run asked for has no record on the topics read."""


class EmptyRange(InputError):
    """The offset or time range holds no record."""


class ArchiveError(InputError):
    """A file cannot be read as a modelevents archive, or a record in it is not valid."""


class AuditError(InputError):
    """An archive directory cannot be used as asked (locked, not an archive, bad option)."""


class MissingTopic(ConfigError):
    """The topic to read does not exist on the cluster."""
