"""Signal channels outside the log: a Kafka topic and a JSON-lines file.

(The `source` channel, the signal table, needs no poller: its rows arrive in the binlog
and the snapshot stage reads them in log order.)

Each poller hands signals to the snapshot stage together with the channel position after
them; the stage stores that position in the snapshot state, so it is committed with the
offsets and a restart reads on from there: a signal is acted on once.

- file (`signal.file`): one `{"id": ..., "type": ..., "data": {...}}` object per line,
  appended by the user; a line that is not such an object is recorded as a failed signal.
- kafka (`signal.kafka.topic`): the key must equal `topic.prefix` (messages for other
  connectors are skipped); the value is `{"type": ..., "data": {...}}`; the signal id is
  `kafka-<partition>-<offset>`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cdc_core.signals.actions import RawSignal

log = logging.getLogger("tidemark.signals")

Submit = Callable[[RawSignal, tuple[str, Any]], None]


class _Poller:
    name = "signals"

    def __init__(self, submit: Submit, interval: float) -> None:
        self.submit = submit
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"signal-{self.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.close()

    def close(self) -> None:
        pass

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # a channel problem is reported and retried, never fatal
                log.error("%s signal channel: %s", self.name, exc)
            self._stop.wait(self.interval)

    def poll(self) -> None:
        raise NotImplementedError


class FileChannel(_Poller):
    name = "file"

    def __init__(self, path: Path, position: int, submit: Submit, interval: float) -> None:
        super().__init__(submit, interval)
        self.path = Path(path)
        self.position = position

    def poll(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size < self.position:
            log.warning("signal file %s shrank; reading it from the start", self.path)
            self.position = 0
        with open(self.path, "rb") as f:
            f.seek(self.position)
            data = f.read()
        end = data.rfind(b"\n") + 1  # only complete lines
        at = self.position
        for line in data[:end].splitlines(keepends=True):
            at += len(line)
            text = line.strip()
            if text:
                self.submit(_file_signal(text, at), ("file", at))
        self.position += end


def _file_signal(line: bytes, at: int) -> RawSignal:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return RawSignal(f"file-{at}", "?", None, "file", {"error": f"not a JSON object: {exc}"})
    if not isinstance(doc, dict):
        return RawSignal(f"file-{at}", "?", None, "file", {"error": "not a JSON object"})
    signal_id = doc.get("id")
    return RawSignal(
        str(signal_id) if signal_id else f"file-{at}", str(doc.get("type") or ""), doc.get("data"), "file"
    )


class KafkaChannel(_Poller):
    name = "kafka"

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        prefix: str,
        positions: dict[str, int],
        submit: Submit,
        interval: float,
    ) -> None:
        super().__init__(submit, interval)
        from confluent_kafka import Consumer

        self.topic = topic
        self.prefix = prefix
        self.positions = {int(p): int(o) for p, o in positions.items()}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"tidemark-signals-{prefix}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self._assigned = False

    def _assign(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        metadata = self.consumer.list_topics(self.topic, timeout=10)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return  # not created yet
        self.consumer.assign(
            [TopicPartition(self.topic, p, self.positions.get(p, OFFSET_BEGINNING)) for p in topic.partitions]
        )
        self._assigned = True

    def poll(self) -> None:
        if not self._assigned:
            self._assign()
            if not self._assigned:
                return
        for message in self.consumer.consume(100, timeout=0.5):
            if message.error():
                log.warning("signal topic %s: %s", self.topic, message.error())
                continue
            partition, offset = message.partition(), message.offset()
            self.positions[partition] = offset + 1
            position = ("kafka", {str(p): o for p, o in self.positions.items()})
            key = (message.key() or b"").decode("utf-8", "replace")
            signal_id = f"kafka-{partition}-{offset}"
            if key != self.prefix:
                log.debug("skipping signal %s: key %r is not this connector's topic.prefix", signal_id, key)
                self.submit(RawSignal(signal_id, "", None, "kafka", {"skip": True}), position)
                continue
            try:
                doc = orjson.loads(message.value() or b"")
                kind, data = (doc.get("type"), doc.get("data")) if isinstance(doc, dict) else (None, None)
                extra = {} if isinstance(doc, dict) else {"error": "the message value is not a JSON object"}
            except orjson.JSONDecodeError as exc:
                kind, data, extra = None, None, {"error": f"the message value is not JSON: {exc}"}
            self.submit(RawSignal(signal_id, str(kind or ""), data, "kafka", extra), position)

    def close(self) -> None:
        self.consumer.close()
