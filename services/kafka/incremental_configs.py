"""Kafka's IncrementalAlterConfigs (API key 44, KIP-339) for topic configs, on aiokafka's admin client.

aiokafka 0.14's admin client has only the legacy AlterConfigs (API key 33), which replaces a
topic's whole set of topic-level configs: every config not named in the request falls back to
the broker's default, so fixing ``min.insync.replicas`` that way would silently reset a
retention someone set by hand. IncrementalAlterConfigs sets (or deletes) only the configs it
names. The request is version 0 (non-flexible; every broker since Kafka 2.3, Kafka 4 included),
declared with aiokafka's own protocol types and sent through the admin client's connection, so
it uses the same bootstrap, TLS and SASL settings as every other client of the pipeline.

Public API::

    await set_topic_configs(admin, {"modelevents.events": {"retention.ms": "604800000"}})
    # -> {topic: None (applied) | "the broker's error message"}
"""

from __future__ import annotations

from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Schema, String

__all__ = ["set_topic_configs"]

_TOPIC_RESOURCE = 2  # ConfigResource type TOPIC
_OP_SET = 0  # AlterConfigOp: SET (1 DELETE, 2 APPEND, 3 SUBTRACT)


class _IncrementalAlterConfigsResponseV0(Response):
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(
            ("error_code", Int16),
            ("error_message", String("utf-8")),
            ("resource_type", Int8),
            ("resource_name", String("utf-8")),
        )),
    )


class _IncrementalAlterConfigsRequestV0(RequestStruct):
    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = _IncrementalAlterConfigsResponseV0
    SCHEMA = Schema(
        ("resources", Array(
            ("resource_type", Int8),
            ("resource_name", String("utf-8")),
            ("configs", Array(
                ("name", String("utf-8")),
                ("config_operation", Int8),
                ("value", String("utf-8")),
            )),
        )),
        ("validate_only", Boolean),
    )


class _IncrementalAlterConfigs(Request[_IncrementalAlterConfigsRequestV0]):
    API_KEY = 44

    def __init__(self, resources: list[Any]) -> None:
        self._resources = resources

    def build(self, request_struct_class: type[_IncrementalAlterConfigsRequestV0],
              ) -> _IncrementalAlterConfigsRequestV0:
        return request_struct_class(self._resources, False)


async def set_topic_configs(admin: AIOKafkaAdminClient, configs: dict[str, dict[str, str]],
                            ) -> dict[str, str | None]:
    """Set the given topic-level configs of each topic, leaving its other configs as they are.

    Returns, per topic, None when the broker applied the change, else the broker's error (e.g.
    ``InvalidConfigurationException``: the value is refused; nothing of that topic changed)."""
    if not configs:
        return {}
    resources = [(_TOPIC_RESOURCE, topic,
                  [(name, _OP_SET, value) for name, value in sorted(values.items())])
                 for topic, values in configs.items()]
    # Topic configs are handled by any broker (in KRaft it forwards them to the controller).
    response: Any = await admin._send_request(_IncrementalAlterConfigs(resources))
    result: dict[str, str | None] = {}
    for code, message, _type, topic in response.responses:
        result[topic] = None if code == 0 else (message or f"error code {code}")
    return result
