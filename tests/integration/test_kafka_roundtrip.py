"""The local KRaft broker: confluent-kafka produces, confluent-kafka and Spark's Kafka
source (from the Maven-fetched jars) read the same records back."""

from __future__ import annotations

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
