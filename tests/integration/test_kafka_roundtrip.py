"""The local KRaft broker: confluent-kafka produces, confluent-kafka and Spark's Kafka
source (from the Maven-fetched jars) read the same records back."""

from __future__ import annotations

import os
import uuid

import pytest

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    from confluent_kafka import Producer

    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * len(records)


def test_message_round_trip_confluent_and_spark(kafka_bootstrap, spark):
    from confluent_kafka import Consumer

    topic = f"tidemark-smoke-{uuid.uuid4().hex[:8]}"
    records = [(f"k{i}", f'{{"n": {i}}}') for i in range(20)]
    _produce(kafka_bootstrap, topic, records)

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is None:
                if len(seen) == len(records):
                    break
                continue
            assert msg.error() is None, msg.error()
            seen.append((msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    assert seen == records

    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v", "offset")
    )
    rows = [(r.k, r.v) for r in df.orderBy("offset").collect()]
    assert rows == records


@pytest.mark.parametrize("producer_limit", [None, 10_000_000], ids=["producer", "broker"])
def test_a_record_too_large_stops_the_sink_saying_its_size_and_what_to_raise(kafka_bootstrap, producer_limit):
    """A row larger than the broker takes (1 MB by default) comes again at every restart:
    the error says which record and which limits to raise, whether the producer refuses it
    (its own message.max.bytes) or the broker does (the producer's raised)."""
    from cdc_core.events.envelope import Record
    from cdc_core.sinks.kafka_sink import KafkaSink, KafkaSinkError

    acked: list[int] = []
    extra = {} if producer_limit is None else {"message.max.bytes": producer_limit}
    sink = KafkaSink(kafka_bootstrap, acked.append, extra)
    topic = f"tidemark-large-{uuid.uuid4().hex[:8]}"
    large = Record(topic, b"2", os.urandom(3_000_000))  # (incompressible: the broker sees it compressed)
    small = Record(topic, b"1", b"small")
    with pytest.raises(KafkaSinkError) as refused:
        sink.send([(small, 1), (large, 2)])
        sink.flush(30)
    said = str(refused.value)
    assert "MSG_SIZE_TOO_LARGE" in said and f"a record of 3,000,001 bytes on {topic}" in said
    assert "max.message.bytes" in said and "sink.kafka.producer.message.max.bytes" in said
    assert 2 not in acked
