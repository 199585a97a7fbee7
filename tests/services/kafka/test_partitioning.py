"""The partition of a key: every producer in the pipeline (the outbox, the gateway, the feeder)
must put a run's records where Kafka's default partitioner — Java's, aiokafka's and Faust's —
puts them, or a run's frames and its table state would live on different workers."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.services.kafka.clients import RunKeyPartitioner, murmur2, partition_for_key


@settings(max_examples=2000)
@given(st.binary(max_size=200))
def test_murmur2_equals_aiokafkas(data: bytes) -> None:
    assert murmur2(data) == aiokafka_murmur2(data)


@given(st.text(min_size=1, max_size=80), st.integers(min_value=1, max_value=64))
def test_the_partition_of_a_key_is_the_default_partitioners(key: str, partitions: int) -> None:
    raw = key.encode()
    everyone = list(range(partitions))
    expected = DefaultPartitioner()(raw, everyone, everyone)
    assert partition_for_key(raw, partitions) == expected
    assert RunKeyPartitioner()(raw, everyone, everyone) == expected


def test_known_java_values() -> None:
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2 (the expected values as Java's signed ints)
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             bytes([ord("a"), ord("b"), ord("c")]): 479470107}
    for data, java in cases.items():
        assert murmur2(data) == java & 0xFFFFFFFF, data
