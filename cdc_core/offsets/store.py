"""Durable connector offsets.

An offset is committed only after the sink acknowledged everything before it, and a
commit must be atomic and durable: after `kill -9` at any moment, the store holds either
the previous or the new document, never a torn one. The file store writes a temporary
file, fsyncs it, renames it over the old one and fsyncs the folder; the Kafka store
produces to a compacted topic with an idempotent producer and waits for the broker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import orjson

from cdc_core.durable import replace_file
from cdc_core.errors import TidemarkError
from cdc_core.sinks.kafka_topics import ensure_compacted

FORMAT_VERSION = 1


class OffsetStoreError(TidemarkError):
    """The stored offsets cannot be read or written."""


class OffsetStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def commit(self, offset: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def _document(connector: str, offset: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "version": FORMAT_VERSION,
            "connector": connector,
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "offset": offset,
        }
    )


def _unwrap(raw: bytes, where: str) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise OffsetStoreError(
            f"offsets in {where} are not valid JSON ({exc}); refusing to start from scratch"
        ) from None
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or "offset" not in doc:
        raise OffsetStoreError(
            f"offsets in {where} have an unknown format (version {doc.get('version') if isinstance(doc, dict) else '?'})"
        )
    return doc["offset"]


class FileOffsetStore:
    """One JSON file, replaced atomically on every commit."""

    def __init__(self, path: Path, connector: str) -> None:
        self.path = Path(path)
        self.connector = connector
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def load(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OffsetStoreError(f"cannot read offsets {self.path}: {exc.strerror}") from None
        return _unwrap(raw, str(self.path))

    def commit(self, offset: dict[str, Any]) -> None:
        replace_file(self.path, _document(self.connector, offset))

    def close(self) -> None:
        pass


class KafkaOffsetStore:
    """A compacted topic keyed by connector name (several connectors may share it)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        connector: str,
        replication_factor: int = 1,
        timeout: float = 60.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.servers = bootstrap_servers
        self.topic = topic
        self.connector = connector
        self.timeout = timeout
        self.extra = dict(extra or {})
        self._ensure_topic(replication_factor)
        self._producer = Producer(
            {**self.extra, "bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all"}
        )

    def _ensure_topic(self, replication_factor: int) -> None:
        ensure_compacted(
            self.servers,
            self.topic,
            "offsets",
            OffsetStoreError,
            replication_factor,
            self.timeout,
            self.extra,
        )

    def load(self) -> dict[str, Any] | None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                **self.extra,
                "bootstrap.servers": self.servers,
                "group.id": f"{self.connector}-offsets-reader",
                "enable.auto.commit": False,
            }
        )
        latest: bytes | None = None
        found = False
        key = self.connector.encode()
        deadline = time.monotonic() + self.timeout
        try:
            low, high = self._watermarks(consumer, deadline)
            if high <= low:
                return None
            consumer.assign([TopicPartition(self.topic, 0, low)])
            position = low
            while position < high:
                msg = consumer.poll(1.0)
                late = time.monotonic() > deadline
                if msg is not None and msg.error() and (late or not _transient(msg.error())):
                    raise OffsetStoreError(f"cannot read offsets topic {self.topic}: {msg.error()}")
                if msg is None or msg.error():  # nothing yet, or an error that passes
                    if late:
                        raise OffsetStoreError(f"timed out reading offsets topic {self.topic}")
                    continue
                position = msg.offset() + 1
                if msg.key() == key:
                    latest, found = msg.value(), True
        finally:
            consumer.close()
        if not found or latest is None:
            return None
        return _unwrap(latest, f"topic {self.topic}")

    def _watermarks(self, consumer: Any, deadline: float) -> tuple[int, int]:
        """The topic's first and next offsets. A topic just created (or whose broker just
        changed) has no partition leader for a moment: that is waited out, not fatal."""
        from confluent_kafka import KafkaException, TopicPartition

        while True:
            try:
                return consumer.get_watermark_offsets(
                    TopicPartition(self.topic, 0), timeout=max(1.0, deadline - time.monotonic())
                )
            except KafkaException as exc:
                error = exc.args[0]
                if not _transient(error) or time.monotonic() >= deadline:
                    raise OffsetStoreError(f"cannot read offsets topic {self.topic}: {error.str()}") from None
            time.sleep(0.2)

    def commit(self, offset: dict[str, Any]) -> None:
        errors: list[Any] = []
        self._producer.produce(
            self.topic,
            key=self.connector.encode(),
            value=_document(self.connector, offset),
            on_delivery=lambda err, _msg: errors.append(err),
        )
        remaining = self._producer.flush(self.timeout)
        if remaining or not errors or errors[0] is not None:
            problem = errors[0] if errors and errors[0] is not None else "no acknowledgement in time"
            raise OffsetStoreError(f"cannot commit offsets to {self.topic}: {problem}")

    def close(self) -> None:
        self._producer.flush(5)


def _transient(error: Any) -> bool:
    """A Kafka error that goes away by itself: a partition without a leader yet, a topic
    the broker does not know yet, a connection being made again."""
    from confluent_kafka import KafkaError

    return bool(error.retriable()) or error.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    )
