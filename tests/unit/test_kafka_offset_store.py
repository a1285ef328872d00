"""The Kafka offset store at start: an offsets topic whose partition has no leader yet (just
created, or its broker just changed) is waited for; an error that will not pass stops the
start with the topic named. The position itself is read as the integration test shows
(`tests/integration/test_streamer_kafka_state.py`)."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException

from cdc_core.offsets import store as store_module
from cdc_core.offsets.store import KafkaOffsetStore, OffsetStoreError


class FakeConsumer:
    """Answers the watermark request with the errors queued in `failures`, then empty."""

    failures: list[int] = []
    asked = 0

    def __init__(self, config):
        self.config = config

    def get_watermark_offsets(self, partition, timeout):
        FakeConsumer.asked += 1
        if FakeConsumer.failures:
            raise KafkaException(KafkaError(FakeConsumer.failures.pop(0)))
        return 0, 0

    def close(self):
        pass


@pytest.fixture
def offsets(monkeypatch):
    monkeypatch.setattr(store_module, "ensure_compacted", lambda *args: None)
    monkeypatch.setattr(confluent_kafka, "Producer", lambda config: None)
    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    monkeypatch.setattr(store_module.time, "sleep", lambda seconds: None)
    FakeConsumer.asked = 0
    return KafkaOffsetStore("127.0.0.1:1", "prefix.offsets", "c1", timeout=30.0)


def test_an_offsets_partition_without_a_leader_yet_is_waited_for(offsets):
    FakeConsumer.failures = [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE]
    assert offsets.load() is None  # an empty topic: no position yet
    assert FakeConsumer.asked == 3


def test_an_error_that_will_not_pass_stops_the_start_naming_the_topic(offsets):
    FakeConsumer.failures = [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with pytest.raises(OffsetStoreError, match="prefix.offsets: .*authorization failed"):
        offsets.load()
    assert FakeConsumer.asked == 1


def test_a_leader_that_never_comes_stops_the_start_after_the_timeout(offsets, monkeypatch):
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(store_module.time, "monotonic", lambda: next(clock))
    FakeConsumer.failures = [KafkaError.NOT_LEADER_FOR_PARTITION] * 100
    with pytest.raises(OffsetStoreError, match="prefix.offsets.*[Nn]ot leader"):
        offsets.load()
    assert 1 < FakeConsumer.asked < 10
