"""The long-running streamer: log reader → bounded queue → dispatcher → sink → offsets.

The reader runs in its own thread so a slow sink applies backpressure through the
bounded queue (`max.queue.size`) instead of growing memory. Offsets are committed only
from sink acknowledgements. Every failure takes the same way out: wait for what was
sent to be acknowledged, commit, and either restart the reader from the committed
offset (the database went away) or stop with a message (anything a retry cannot fix).
SIGTERM/SIGINT stop gracefully: flush, commit, exit 0.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import SourceUnavailableError, TidemarkError
from cdc_core.events.envelope import Record
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.pipeline.liveness import process_identity
from cdc_core.pipeline.snapshot_setup import signal_channels, snapshot_stage
from cdc_core.pipeline.state import Lease, StateLayout, open_offset_store, open_sink
from cdc_core.schema.history import SchemaHistory
from cdc_core.snapshot.coordinator import ChunkCoordinator
from cdc_core.source import Source

log = logging.getLogger("tidemark.streamer")

_END = object()


@dataclass
class _Failure:
    error: BaseException


class Streamer:
    """Runs one connector until stopped (or for a bounded time / number of events)."""

    def __init__(self, config: ConnectorConfig, status_line: bool = False) -> None:
        self.config = config
        self.layout = StateLayout(config)
        self.status_line = status_line
        self.batch_size = config.get("max.batch.size")
        self.queue_batches = max(2, config.get("max.queue.size") // self.batch_size)
        self.flush_interval = config.get("offset.flush.interval.ms") / 1000
        self.heartbeat_interval = config.get("heartbeat.interval.ms") / 1000
        self._stop = threading.Event()
        self.tracker = AckTracker()
        self.committed: dict[str, Any] | None = None
        self.source: Source | None = None  # the open reader session's
        self.events_total = 0
        self.exit_reason = ""
        self._identity = process_identity()

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self, *_: Any) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    def run(self, max_seconds: float | None = None, stop_when_idle: float | None = None) -> int:
        """Stream until stopped. `max_seconds` bounds the run; `stop_when_idle` stops after
        the log has been idle (and everything acknowledged) that long. Returns the exit code."""
        lease = Lease(self.layout.lease)
        self.offsets = open_offset_store(self.config, self.layout)
        try:
            self.sink = open_sink(self.config, self.tracker.ack)
            try:
                return self._run(max_seconds, stop_when_idle)
            finally:
                self.sink.close()
        finally:
            self.offsets.close()
            lease.release()

    def _new_source(self) -> Source:
        history = SchemaHistory(
            self.layout.history, self.config.get("schema.history.internal.checkpoint.interval")
        )
        return connector_of(self.config).create_source(self.config, history)

    def _run(self, max_seconds: float | None, stop_when_idle: float | None) -> int:
        started = time.monotonic()
        deadline = None if max_seconds is None else started + max_seconds
        retries = 0
        max_retries = self.config.get("errors.max.retries")
        delay = self.config.get("errors.retry.delay.initial.ms") / 1000
        max_delay = self.config.get("errors.retry.delay.max.ms") / 1000
        self.committed = self.offsets.load()
        while True:
            source = self._new_source()
            try:
                source.open(self.committed)
            except TidemarkError as exc:
                source.close()
                if (
                    not _retriable(exc)
                    or (max_retries >= 0 and retries >= max_retries)
                    or self._stop.is_set()
                ):
                    return self._fail(exc)
                retries += 1
                log.warning("%s; retrying in %.1fs (attempt %d)", exc, delay, retries)
                self._stop.wait(delay)
                delay = min(delay * 2, max_delay)
                continue
            self.source = source
            session_start, events_before = time.monotonic(), self.events_total
            try:
                outcome = self._stream(source, deadline, stop_when_idle)
            except TidemarkError as exc:  # a setting that only shows once the source is open
                source.close()
                return self._fail(exc)
            source.close()
            self._write_status("stopped")
            if isinstance(outcome, _Failure):
                exc = outcome.error
                if self.events_total > events_before or time.monotonic() - session_start >= max_delay:
                    # The session streamed: `errors.max.retries` counts one outage, not a lifetime's.
                    retries, delay = 0, self.config.get("errors.retry.delay.initial.ms") / 1000
                if _retriable(exc) and not self._stop.is_set() and (max_retries < 0 or retries < max_retries):
                    retries += 1
                    log.warning("%s; reconnecting from the committed offset in %.1fs", exc, delay)
                    self._stop.wait(delay)
                    delay = min(delay * 2, max_delay)
                    continue
                return self._fail(exc)
            return 0 if outcome else 1

    def _fail(self, exc: BaseException) -> int:
        self.exit_reason = str(exc)
        self._write_status("failed", error=str(exc))
        if isinstance(exc, TidemarkError):
            log.error("%s", exc)
            return 1
        raise exc

    # ------------------------------------------------------------------ the loop

    def _stream(
        self, source: Source, deadline: float | None, stop_when_idle: float | None
    ) -> bool | _Failure:
        """One reader session. True: stopped cleanly; False: could not deliver everything;
        _Failure: the reader or the sink failed (after committing what was acknowledged)."""
        dispatcher = Dispatcher(self.config, source, self.tracker, resume=self.committed)
        self.dispatcher = dispatcher
        stage = snapshot_stage(self.config, source, self.committed, self.layout)
        self.stage = stage
        read_only = self.config.get("read.only")
        chunks = ChunkCoordinator(
            stage, source.chunk_source, lambda t: source.current_tables().get(t), read_only=read_only
        )
        if stage.signal_table is not None or read_only:
            chunks.start()
        channels: list[Any] = []
        batches: queue.Queue[Any] = queue.Queue(maxsize=self.queue_batches)
        reader = threading.Thread(target=self._read, args=(source, batches), name="log-reader", daemon=True)
        reader.start()
        last_commit = last_status = last_heartbeat = time.monotonic()
        last_activity = time.monotonic()
        window_start, window_events = time.monotonic(), 0
        failure: _Failure | None = None
        try:
            channels = signal_channels(self.config, stage)
            for channel in channels:
                channel.start()
            while not self._stop.is_set():
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if stage.busy():  # a blocking snapshot: the log waits (the reader blocks on the full queue)
                    records = dispatcher.process(stage.drain())
                    if records:
                        self.sink.send(records)
                    self.sink.poll()
                    continue
                try:
                    item = batches.get(timeout=0.2)
                except queue.Empty:
                    item = None
                if item is _END:
                    break
                if isinstance(item, _Failure):
                    failure = item
                    break
                if not item and stage.has_outside_signals():  # kafka/file signals on an idle log
                    records = dispatcher.process(stage.process([]))
                    if records:
                        self.sink.send(records)
                    dispatcher.state_at_rest()
                if item:
                    before = dispatcher.stats.events
                    records = dispatcher.process(stage.process(item))
                    if records:
                        self.sink.send(records)
                    produced = dispatcher.stats.events - before
                    self.events_total += produced
                    window_events += produced
                    if produced:
                        last_activity = now
                self.sink.poll()
                if self.heartbeat_interval and now - last_heartbeat >= self.heartbeat_interval:
                    self._heartbeat()
                    last_heartbeat = now
                if now - last_commit >= self.flush_interval:
                    self._commit()
                    last_commit = now
                if now - last_status >= 2.0:
                    rate = window_events / max(now - window_start, 1e-6)
                    self._report(rate)
                    window_start, window_events, last_status = now, 0, now
                if (
                    stop_when_idle is not None
                    and now - last_activity >= stop_when_idle
                    and batches.empty()
                    and self.tracker.outstanding == 0
                ):
                    break
        except TidemarkError as exc:
            failure = _Failure(exc)
        finally:
            for channel in channels:
                channel.stop()
            chunks.stop()
            source.stop()
            self._drain(batches)
            reader.join(timeout=10)
        delivered = self._finish()
        if failure is not None:
            return failure
        return delivered

    def _read(self, source: Source, batches: queue.Queue[Any]) -> None:
        try:
            for whole in source.read():
                # A source hands on a transaction at once when its position comes at its end
                # (Vitess): cut into batches, it is serialized and sent as the queue allows.
                parts = (
                    [whole]
                    if len(whole) <= self.batch_size
                    else [whole[i : i + self.batch_size] for i in range(0, len(whole), self.batch_size)]
                )
                for batch in parts:
                    while not self._stop.is_set():
                        try:
                            batches.put(batch, timeout=0.5)
                            break
                        except queue.Full:
                            continue
                    if self._stop.is_set():
                        return
        except BaseException as exc:  # handed to the main thread, which decides
            self._put_last(batches, _Failure(exc))
            return
        self._put_last(batches, _END)

    def _put_last(self, batches: queue.Queue[Any], item: Any) -> None:
        while True:
            try:
                batches.put(item, timeout=0.5)
                return
            except queue.Full:
                if self._stop.is_set():
                    return

    def _drain(self, batches: queue.Queue[Any]) -> None:
        """Let a reader blocked on a full queue finish; its batches are re-read after restart."""
        try:
            while True:
                batches.get_nowait()
        except queue.Empty:
            pass

    def _finish(self) -> bool:
        """Wait for acknowledgements of everything sent, then commit."""
        try:
            delivered = self.sink.flush(timeout=30)
        finally:
            self._commit()  # what was acknowledged before a flush that fails is kept
        if not delivered:
            log.error(
                "%d record(s) were not acknowledged before shutdown; they will be sent again on restart",
                self.tracker.outstanding,
            )
        return delivered

    def _commit(self) -> None:
        offset = self.tracker.take_committable()
        if offset is not None:
            stage = getattr(self, "stage", None)
            if stage is not None:
                stage.before_commit()  # the open windows' keys reach the disk before the offset
            self.offsets.commit(offset)
            self.committed = offset
            if self.source is not None:
                self.source.committed(offset)
            if stage is not None:
                stage.after_commit(offset.get("snapshot"))

    def _heartbeat(self) -> None:
        prefix = self.config.topic_prefix
        topic = f"{self.config.get('topic.heartbeat.prefix')}.{prefix}"
        key = orjson.dumps({"serverName": prefix})
        value = orjson.dumps({"ts_ms": int(time.time() * 1000)})
        entry = self.tracker.add(None, 1)
        self.sink.send([(Record(topic, key, value), entry)])

    # ------------------------------------------------------------------ status

    def _report(self, rate: float) -> None:
        stats = self.dispatcher.stats
        lag_ms = None
        if stats.last_source_ts_ms is not None:
            lag_ms = max(0, int(time.time() * 1000) - stats.last_source_ts_ms)
        position = (
            self.source.describe(self.committed["source"])
            if self.committed and self.source is not None
            else "-"
        )
        self._write_status("running", rate=rate, lag_ms=lag_ms)
        if self.status_line:
            lag = "-" if lag_ms is None else f"{lag_ms / 1000:.1f}s"
            sys.stderr.write(
                f"\r{self.config.name}: {rate:9.0f} events/s  total {self.events_total}  lag {lag}  at {position}   "
            )
            sys.stderr.flush()

    def _write_status(self, state: str, **extra: Any) -> None:
        stats = getattr(getattr(self, "dispatcher", None), "stats", None)
        doc = {
            "connector": self.config.name,
            "state": state,
            **self._identity,  # pid, host and the process's start: `liveness` tells a dead one by them
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "events_total": self.events_total,
            "per_table": dict(stats.per_table) if stats else {},
            "committed": self.committed,
            "snapshots": stage.progress() if (stage := getattr(self, "stage", None)) is not None else None,
            **extra,
        }
        self.layout.root.mkdir(parents=True, exist_ok=True)
        tmp = self.layout.status.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(doc, default=str))
        os.replace(tmp, self.layout.status)


def _retriable(exc: BaseException) -> bool:
    """Connection trouble is retried from the committed offset; everything else stops."""
    return isinstance(exc, SourceUnavailableError)
