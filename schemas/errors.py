"""The error hierarchy of modelevents: its root and the contract's errors, here; each layer's own
errors in that layer's ``errors`` module, drawn there.

    ModelEventsError                 every error this package raises on purpose
    ├── SchemaError                  a record does not fit, or cannot be read as, its Avro schema
    │   ├── UnknownSchemaError       a fingerprint or record name this version does not ship
    │   ├── CorruptRecord            the bytes end early, or hold a length, count or branch that
    │   │                            cannot be (also a ValueError)
    │   ├── IncompletePieces         pieces that do not make a whole record
    │   ├── UndecodableEvent         a lazily decoded event whose body does not decode when read
    │   └── UnreadableState          a stored run state this version cannot rebuild
    │                                                            (services/errors.py)
    ├── InputError                   input the user gave cannot be read (file, framing, provider)
    │   ├── FramingError             bytes are not SSE / JSON lines / a JSON array / a JSON object
    │   ├── DetectionError           no adapter recognises the input; name --provider
    │   │   └── UnknownApi           a provider API name no adapter is registered for
    │   │                                                        (adapters/errors.py)
    │   ├── InvalidId                a run/stream/webhook id holds what ids may not
    │   ├── InputLimitError, RenderError                                 (adapters/errors.py)
    │   ├── CapabilityRejected, UnknownScenario                          (services/errors.py)
    │   └── NoSuchRun, EmptyRange, ArchiveError, AuditError              (consumers/errors.py)
    ├── ConfigError                  a setting is missing or contradicts another
    │   ├── ManifestError, MissingSDKError                               (services/errors.py)
    │   └── MissingTopic                                                 (consumers/errors.py)
    └── KafkaUnavailable, KafkaSetupError and its kinds, ProviderHTTPError, FollowUpFailed,
        RequestRefused, DemoError                                        (services/errors.py)

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
