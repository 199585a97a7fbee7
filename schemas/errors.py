"""The error hierarchy of modelevents, in one place.

    ModelEventsError                 every error this package raises on purpose
    ├── SchemaError                  a record does not fit, or cannot be read as, its Avro schema
    │   └── UnknownSchemaError       a fingerprint or record name this version does not ship
    ├── InputError                   input the user gave cannot be read (file, framing, provider)
    │   ├── FramingError             bytes are not SSE / JSON lines / a JSON array / a JSON object
    │   ├── DetectionError           no adapter recognises the input; name --provider
    │   ├── InvalidId                a run/stream/webhook id holds what ids may not    (schemas/ids.py)
    │   ├── RenderError              a neutral request holds what the target API cannot carry
    │   │                                                        (adapters/requests/base.py)
    │   └── CapabilityRejected       no target offers what a request requires: the gateway's 422
    │                                                          (services/gateway/router.py)
    ├── ConfigError                  a setting is missing or contradicts another
    │   └── ManifestError            the capability manifest is unreadable or off its schema
    │                                                    (services/gateway/capabilities.py)
    ├── KafkaUnavailable             the broker cannot be reached           (services/kafka/clients.py)
    └── KafkaSetupError              the local broker cannot be obtained or started
        ├── MissingToolError         java or mvn is not installed          (services/local/kafka_broker.py)
        ├── JarDownloadError         Maven could not fetch the broker's jars
        ├── PortInUseError           the broker's port is taken by another program
        ├── StorageFormatError       the data directory could not be formatted
        └── BrokerStartError         the JVM exited or never became ready (with the log tail)
            └── BrokerStartTimeout

Adapters never raise for what a provider sends: malformed or unknown frames become `error` and
`unknown` events, because a stream processor must not die on one bad frame. These exceptions are
for the caller's mistakes and for records that cannot be decoded at all.
"""


class ModelEventsError(Exception):
    """Base of every error modelevents raises on purpose."""


class SchemaError(ModelEventsError):
    """A record does not fit, or cannot be read as, its Avro schema."""


class UnknownSchemaError(SchemaError):
    """The writer schema's fingerprint or record name is not among the shipped schemas."""


class InputError(ModelEventsError):
    """Input given by the user cannot be read."""


class FramingError(InputError):
    """The bytes are none of the framings modelevents reads."""


class DetectionError(InputError):
    """No adapter recognises the input."""


class ConfigError(ModelEventsError):
    """A setting is missing or contradicts another."""
