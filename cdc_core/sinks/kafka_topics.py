"""Kafka topics whose every key must outlive retention: created compacted, refused otherwise.

The offsets topic (one record per connector) and the schemas topic (one per value schema,
`cdc_core.pipeline.schema_references`) are read whole by whoever starts: a record deleted
by time-based retention would be a lost offset or a value whose schema nobody can find.
"""

from __future__ import annotations

from typing import Any


def connection_settings(producer: dict[str, Any]) -> dict[str, Any]:
    """Of a producer's settings, those an admin client needs to reach the same cluster."""
    return {k: v for k, v in producer.items() if k.startswith(("security.", "sasl.", "ssl.", "client."))}


def ensure_compacted(
    servers: str,
    topic: str,
    what: str,
    error: type[Exception],
    replication_factor: int = 1,
    timeout: float = 60.0,
    extra: dict[str, Any] | None = None,
) -> None:
    """Create `topic` compacted if it is missing; `error` naming `what` it holds if Kafka
    cannot be reached or the topic exists without compaction."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({**(extra or {}), "bootstrap.servers": servers})
    try:
        topics = admin.list_topics(timeout=timeout).topics
    except Exception as exc:
        raise error(f"cannot reach Kafka to read {what} topic {topic}: {exc}") from None
    if topic not in topics:
        futures = admin.create_topics(
            [NewTopic(topic, 1, replication_factor, config={"cleanup.policy": "compact"})]
        )
        try:
            futures[topic].result(timeout)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise error(f"cannot create {what} topic {topic}: {exc}") from None
        return
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        config = admin.describe_configs([resource])[resource].result(timeout)
    except Exception as exc:  # e.g. no DescribeConfigs permission on the topic
        raise error(f"cannot read the configuration of {what} topic {topic}: {exc}") from None
    policy = config["cleanup.policy"].value
    if "compact" not in policy:
        raise error(
            f"{what} topic {topic} has cleanup.policy={policy}; it must be compact, or old {what} records "
            "would be deleted by retention"
        )
