"""The root of modelevents' errors and the contract's own: ``ModelEventsError``, the branches
every layer's errors hang from (``SchemaError``, ``InputError``, ``ConfigError``), and the
errors of reading records and input. Each layer's own errors are in that layer's ``errors``
module; the whole tree is drawn once, in docs/errors.md, and tests/schemas/test_error_tree.py
holds the drawing to the classes.

Adapters never raise for what a provider sends: malformed or unknown frames become `error` and
`unknown` events, because a stream processor must not die on one bad frame. These exceptions are
for the caller's mistakes and for records that cannot be decoded at all. Every message says what
was wrong with which input or setting, and what to do.
"""

__all__ = ["ModelEventsError", "SchemaError", "UnknownSchemaError", "CorruptRecord",
           "IncompletePieces", "UndecodableEvent", "InputError", "FramingError", "DetectionError", "InvalidId",
           "ConfigError"]


class ModelEventsError(Exception):
    """Base of every error modelevents raises on purpose."""


class SchemaError(ModelEventsError):
    """A record does not fit, or cannot be read as, its Avro schema."""


class UnknownSchemaError(SchemaError):
    """The writer schema's fingerprint or record name is not among the shipped schemas."""


class CorruptRecord(SchemaError, ValueError):
    """The bytes end early, or hold a length, count or branch that cannot be (the compiled Avro
    readers, ``schemas/avro_reader.py``)."""


class UndecodableEvent(SchemaError):
    """A LazyModelEvent (``schemas/lazy_event.py``) whose header was read and whose other fields
    do not decode, raised where one of them is first read; ``event`` is that event."""

    def __init__(self, message: str, event: object) -> None:
        super().__init__(message)
        self.event = event


class IncompletePieces(SchemaError):
    """Pieces that do not make a whole: missing, out of order, or of different records."""


class InputError(ModelEventsError):
    """Input given by the user cannot be read."""


class FramingError(InputError):
    """The bytes are none of the framings modelevents reads."""


class DetectionError(InputError):
    """No adapter recognises the input."""


class InvalidId(InputError):
    """An id a caller named is empty, too long, or holds a character ids may not hold."""


class ConfigError(ModelEventsError):
    """A setting is missing or contradicts another."""
