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
from tests.unit.test_streamer_batches import CONFIG


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


KAFKA_CONNECTOR = (
    CONFIG
    + """sink.type: kafka
sink.kafka.bootstrap.servers: b1:9093
offset.storage: kafka
sink.kafka.producer.security.protocol: SASL_SSL
sink.kafka.producer.sasl.mechanism: PLAIN
sink.kafka.producer.sasl.username: tidemark
sink.kafka.producer.compression.type: zstd
"""
)


def kafka_config(tmp_path, extra: str = "", environ: dict | None = None):
    from cdc_core.config.connector_config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(KAFKA_CONNECTOR + extra)
    return load_config(path, environ={"TIDEMARK_DB_PASSWORD": "x", **(environ or {})})


def test_the_offset_store_reaches_a_secured_cluster_as_the_sink_does(tmp_path, monkeypatch):
    """Without the sink's security settings it could not even read its topic there."""
    from cdc_core.pipeline import state

    opened = {}
    monkeypatch.setattr(state, "KafkaOffsetStore", lambda *args, extra: opened.update(args=args, extra=extra))
    config = kafka_config(tmp_path, environ={"TIDEMARK_KAFKA_SASL_PASSWORD": "s3cret"})
    state.open_offset_store(config, state.StateLayout(config))
    assert opened["args"] == ("b1:9093", "shop.offsets", "shop")
    assert opened["extra"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "tidemark",
        "sasl.password": "s3cret",  # from the environment, as the sink's producer gets it
    }
    assert "s3cret" not in repr(config)


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"])
def test_a_password_written_in_the_connector_file_is_refused(tmp_path, key):
    from cdc_core.config.connector_config import ConfigError

    with pytest.raises(
        ConfigError, match="secrets must not be written in the connector file.*TIDEMARK_KAFKA"
    ):
        kafka_config(tmp_path, f"sink.kafka.producer.{key}: hunter2\n")


def test_a_topic_whose_configuration_cannot_be_read_stops_naming_it(monkeypatch):
    from confluent_kafka import admin

    from cdc_core.sinks.kafka_topics import ensure_compacted

    class Refusing:
        def __init__(self, config):
            pass

        def list_topics(self, timeout):
            return type("Metadata", (), {"topics": {"shop.offsets": None}})()

        def describe_configs(self, resources):
            failed = confluent_kafka.KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
            return {
                r: type("Future", (), {"result": lambda self, t: (_ for _ in ()).throw(failed)})()
                for r in resources
            }

    monkeypatch.setattr(admin, "AdminClient", Refusing)
    with pytest.raises(OffsetStoreError, match="cannot read the configuration of offsets topic shop.offsets"):
        ensure_compacted("b1:9093", "shop.offsets", "offsets", OffsetStoreError)
