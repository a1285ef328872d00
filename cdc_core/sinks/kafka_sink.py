"""Kafka sink: an idempotent producer with acks=all; delivery reports drive acknowledgements.

A broker outage must lose nothing: messages never time out in the producer
(`message.timeout.ms=0`), idempotence keeps their order and removes retry duplicates,
and when the local queue is full `send` blocks (polling for reports) until the broker is
back. Offsets only move for records the broker confirmed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import Record
from cdc_core.sinks.base import AckCallback

log = logging.getLogger("tidemark.sink.kafka")

PRODUCER_DEFAULTS = {
    "enable.idempotence": True,
    "acks": "all",
    "message.timeout.ms": 0,  # never give up on a message: block instead
    "linger.ms": 20,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 262_144,
}


class KafkaSinkError(TidemarkError):
    """The broker refused records for good (not a transient outage)."""


class KafkaSink:
    def __init__(
        self, bootstrap_servers: str, on_ack: AckCallback, extra: Mapping[str, Any] | None = None
    ) -> None:
        config = {**PRODUCER_DEFAULTS, **(extra or {}), "bootstrap.servers": bootstrap_servers}
        config["error_cb"] = self._on_error
        self._producer = Producer(config)
        self._on_ack = on_ack
        self._fatal: str | None = None
        self._last_outage_log = 0.0

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = f"{err.name()}: {err.str()}"
        elif time.monotonic() - self._last_outage_log > 10:
            self._last_outage_log = time.monotonic()
            log.warning("Kafka is unavailable (%s); holding records and retrying", err.str())

    def _delivered(self, entry: int) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                size = len(msg.value() or b"") + len(msg.key() or b"")
                self._fatal = f"delivery failed: {refusal(err, msg.topic(), size)}"
                return
            self._on_ack(entry)

        return report

    def send(self, records: list[tuple[Record, int]]) -> None:
        produce = self._producer.produce
        for record, entry in records:
            while True:
                self._raise_if_fatal()
                try:
                    produce(
                        record.topic,
                        value=record.value,
                        key=record.key,
                        headers=list(record.headers) if record.headers else None,
                        on_delivery=self._delivered(entry),
                    )
                    break
                except BufferError:
                    # The local queue is full (slow or absent broker): wait for reports.
                    self._producer.poll(0.5)
                except KafkaException as exc:
                    size = len(record.value or b"") + len(record.key or b"")
                    why = refusal(exc.args[0], record.topic, size) if exc.args else str(exc)
                    raise KafkaSinkError(f"cannot produce to {record.topic}: {why}") from None
        self._producer.poll(0)

    def poll(self) -> None:
        self._producer.poll(0)
        self._raise_if_fatal()

    def flush(self, timeout: float | None = None) -> bool:
        remaining = self._producer.flush(-1 if timeout is None else timeout)
        self._raise_if_fatal()
        return remaining == 0

    def close(self) -> None:
        self._producer.flush(5)

    def _raise_if_fatal(self) -> None:
        if self._fatal:
            raise KafkaSinkError(f"Kafka refused records: {self._fatal}")


def refusal(err: KafkaError, topic: str, size: int) -> str:
    """What the broker or the producer refused, and for a record too large, what to set:
    it comes again at every restart until the limits let it through."""
    said = f"{err.name()}: {err.str()}"
    if err.code() != KafkaError.MSG_SIZE_TOO_LARGE:
        return said
    return (
        f"{said} (a record of {size:,} bytes on {topic}: raise the topic's max.message.bytes, the broker's "
        "message.max.bytes and sink.kafka.producer.message.max.bytes above it, or leave the column that makes "
        "it large out with column.exclude.list)"
    )
