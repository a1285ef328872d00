"""What the streamer captured, read back from its event log (the embedded log or Kafka):
change events per table and operation, transaction boundaries, schema changes and a
primary-key change, as the demo prints them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig

Event = tuple[Any, Any, dict[str, bytes]]


def events_by_topic(config: ConnectorConfig) -> dict[str, list[Event]]:
    """Every record of the connector's topics, decoded, in log order per topic."""
    if config.get("sink.type") == "kafka":
        return _from_kafka(config)
    from cdc_core.pipeline.state import local_log_directory
    from cdc_core.sinks.local_log import LocalEventLog

    log = LocalEventLog.open_reader(local_log_directory(config))
    return {topic: [_decode(r.key, r.value, r.headers) for r in log.read(topic)] for topic in log.topics()}


def _decode(key: bytes | None, value: bytes | None, headers: dict[str, bytes]) -> Event:
    k = orjson.loads(key) if key else None
    v = orjson.loads(value) if value else None
    if isinstance(k, dict) and "payload" in k and "schema" in k:
        k = k["payload"]
    if isinstance(v, dict) and "payload" in v and "schema" in v:
        v = v["payload"]
    return k, v, headers


def _from_kafka(config: ConnectorConfig) -> dict[str, list[Event]]:
    from confluent_kafka import Consumer, TopicPartition

    servers = config.get("sink.kafka.bootstrap.servers")
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "tidemark-demo-verify", "enable.auto.commit": False}
    )
    prefix = config.topic_prefix
    out: dict[str, list[Event]] = {}
    try:
        topics = [
            t for t in consumer.list_topics(timeout=10).topics if t == prefix or t.startswith(prefix + ".")
        ]
        for topic in topics:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            consumer.assign([TopicPartition(topic, 0, low)])
            events: list[Event] = []
            while low + len(events) < high:
                msg = consumer.poll(5)
                if msg is None:
                    break
                events.append(_decode(msg.key(), msg.value(), dict(msg.headers() or [])))
            out[topic] = events
    finally:
        consumer.close()
    return out


def print_captured(topics: dict[str, list[Event]], prefix: str, database: str) -> None:
    """Change events per table and operation, then the transaction boundaries, each figure
    said with what it counts: the snapshot's high watermarks are transactions of their own
    in the log, and in lakehouse mode each released window is one release record inside
    one of them (its rows go to Delta from staging, never as `r` events)."""
    print(f"\n{'topic':38s} {'r':>6s} {'c':>6s} {'u':>6s} {'d':>6s} {'tombstones':>10s}")
    changes, snapshot_txns = 0, set()
    for topic in sorted(t for t in topics if t.startswith(f"{prefix}.{database}.")):
        ops = Counter("tombstone" if v is None else v["op"] for _, v, _ in topics[topic])
        changes += sum(n for op, n in ops.items() if op != "tombstone")
        snapshot_txns |= {v["transaction"]["id"] for _, v, _ in topics[topic] if v and v["op"] == "r"}
        print(f"{topic:38s} {ops['r']:6d} {ops['c']:6d} {ops['u']:6d} {ops['d']:6d} {ops['tombstone']:10d}")
    shards = Counter(
        v["source"]["shard"]
        for t in topics
        if t.startswith(f"{prefix}.{database}.")
        for _, v, _ in topics[t]
        if v is not None and v["source"].get("shard")
    )
    if shards:  # a sharded source (Vitess): where the events came from
        print("events per shard: " + ", ".join(f"{shard} {n:,}" for shard, n in sorted(shards.items())))
    releases = [v for _, v, _ in topics.get(f"{prefix}.snapshot_releases", []) if v is not None]
    if releases:
        rows = sum(v["rows"] - len(v["excluded_keys"]) for v in releases)
        print(
            f"(lakehouse release: the snapshot's {rows:,} rows went from staging straight to Delta through "
            f"{len(releases)} release records, one per window, so no table has `r` events)"
        )
    txn = [v for _, v, _ in topics.get(f"{prefix}.transaction", [])]
    ends = [v for v in txn if v["status"] == "END"]
    snapshot_txns |= {v["transaction"]["id"] for v in releases}
    watermarks = sum(1 for v in ends if v["id"] in snapshot_txns)
    inside = sum(v["event_count"] for v in ends)
    print(
        f"\ntransactions: {sum(v['status'] == 'BEGIN' for v in txn)} BEGIN / {len(ends)} END events: "
        f"{len(ends) - watermarks} source transactions with captured changes"
        + (f" and {watermarks} snapshot high watermarks, each releasing a window" if watermarks else "")
    )
    print(
        f"records inside them: {inside:,}"
        + (
            f" = {changes:,} change events + {len(releases)} snapshot release records"
            if releases
            else " change events"
        )
    )
    for change in (v for _, v, _ in topics.get(prefix, []) if v is not None):
        if change.get("ddl"):
            print(f"schema change: {change['ddl'].split(chr(10))[0][:90]}")
        else:  # a definition without a statement (Vitess: a table's columns after its DDL)
            tables = ", ".join(t.get("id", "?") for t in change.get("tableChanges") or [])
            print(f"schema change: the new definition of {tables}")
    products = topics.get(f"{prefix}.{database}.products", [])
    key_change = next(((k, h) for k, v, h in products if h and "__debezium.newkey" in h), None)
    if key_change:
        key, headers = key_change
        new_key = orjson.loads(headers["__debezium.newkey"])
        new_key = new_key.get("payload", new_key)
        print(
            f"primary-key change (products): delete of {key} with header __debezium.newkey={new_key}, "
            "its tombstone, then a create of the new key"
        )
