"""The merge benchmark's events in Kafka, read back as the merge job reads a batch."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def to_kafka(spark, records: str, servers: str, topics: list[str]) -> Callable[[], Any]:
    """The records written to Kafka (their topics, as the streamer would have) and a
    reader of just them, as the merge job reads a batch: offsets from the topics' ends
    before the load to their ends after it."""
    from confluent_kafka import Consumer, TopicPartition

    from spark_jobs.merge.kafka_source import kafka_records

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tidemark-bench"})

    def ends() -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for topic in topics:
            parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for p in parts:
                high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                out.setdefault(topic, {})[str(p)] = high
        return out

    try:
        before = ends()
        spark.read.parquet(records).select("topic", "key", "value").write.format("kafka").option(
            "kafka.bootstrap.servers", servers
        ).save()
        end = ends()
    finally:
        consumer.close()
    # A partition that did not exist before the load starts at 0.
    start = {t: {p: before.get(t, {}).get(p, 0) for p in parts} for t, parts in end.items()}
    options = {
        "subscribe": ",".join(topics),
        "startingOffsets": json.dumps(start),
        "endingOffsets": json.dumps(end),
    }
    return lambda: kafka_records(spark.read, servers, None, **options)
