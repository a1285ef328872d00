"""Read a whole Kafka topic back, for tests that check what a streamer delivered."""

from __future__ import annotations

from typing import Any

import orjson


def read_topic(bootstrap: str, topic: str, timeout: float = 10) -> list[tuple[Any, Any]]:
    """(key, value) of every message of partition 0, JSON-decoded; value None for tombstones."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tidemark-tests", "enable.auto.commit": False}
    )
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)
        except KafkaException:
            return []  # the topic does not exist yet
        consumer.assign([TopicPartition(topic, 0, low)])
        found: list[tuple[Any, Any]] = []
        while len(found) < high - low:
            msg = consumer.poll(timeout)
            if msg is None:
                break
            if msg.error():
                continue
            found.append(
                (
                    orjson.loads(msg.key()) if msg.key() else None,
                    orjson.loads(msg.value()) if msg.value() else None,
                )
            )
        return found
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str, timeout: float = 10) -> int:
    """The offset the next message of partition 0 will get (its high watermark)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tidemark-tests"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)[1]
    finally:
        consumer.close()
