"""The embedded event log as a sink: records are acknowledged when fsync returns.

JSON lines are written and fsynced in the streamer's thread, once per dispatched batch.
Parquet files are landed by the log's own thread while the streamer dispatches the next
batches, which then land together: acknowledgements come a batch or so later, in order."""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.events.envelope import Record
from cdc_core.sinks.base import AckCallback
from cdc_core.sinks.local_log import LocalEventLog

if TYPE_CHECKING:
    from cdc_core.sinks.parquet_log import ParquetEventLog


# Records queued for the Parquet landing thread before `send` waits for it (memory bound).
QUEUED_RECORDS = 20_000
# Parquet: how long records wait to land together (`sink.local.linger.ms`). Each landing is
# one file per topic, so a slow stream landing at every poll wrote a file per transaction
# and topic: a test's stream of a few thousand changes left 2,637 files of 28 KB each (988
# with 500 ms). Acknowledgements, so committed offsets and snapshot progress, wait as long:
# 500 ms made them lag enough to fail timing tests of pausing snapshots; 100 ms keeps them
# prompt and still groups a burst of transactions.
LINGER_SECONDS = 0.1


class LocalLogSink:
    def __init__(
        self,
        directory: Path,
        on_ack: AckCallback,
        parquet: bool = False,
        key_schemas: bool = True,
        value_schemas: bool = True,
        linger: float = LINGER_SECONDS,
    ) -> None:
        self._parquet: ParquetEventLog | None = None
        if parquet:
            from cdc_core.sinks.parquet_log import ParquetEventLog

            self._parquet = ParquetEventLog(directory, key_schemas, value_schemas)
            self.log: LocalEventLog | ParquetEventLog = self._parquet
        else:
            self.log = LocalEventLog(directory)
        self._on_ack = on_ack
        self._linger = linger
        self._unacked: list[int] = []
        self._waiting_since = 0.0  # when the oldest record not yet handed to the landing came
        # Parquet: records handed to the landing thread, acknowledged when it has landed them.
        self._landing: deque[tuple[Future[None], list[int]]] = deque()

    def send(self, records: list[tuple[Record, int]]) -> None:
        if not self._unacked:
            self._waiting_since = time.monotonic()
        self.log.append(r for r, _ in records)
        self._unacked.extend(entry for _, entry in records)
        if self._parquet is not None and len(self._unacked) >= QUEUED_RECORDS and self._landing:
            # The landing thread is behind: wait for it rather than queue without bound.
            self._wait_first()
            self.poll()

    def poll(self) -> None:
        if self._parquet is None:
            if self._unacked:  # one fsync per dispatched batch: durable before acknowledged
                self.flush()
            return
        self._acknowledge_landed()
        if self._unacked and not self._landing:  # group what came while the last landing ran
            if time.monotonic() - self._waiting_since < self._linger and len(self._unacked) < QUEUED_RECORDS:
                return
            self._landing.append((self._parquet.submit(), self._unacked))
            self._unacked = []

    def flush(self, timeout: float | None = None) -> bool:
        if self._parquet is not None:
            if self._unacked:
                self._landing.append((self._parquet.submit(), self._unacked))
                self._unacked = []
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._landing:
                if not self._wait_first(None if deadline is None else max(0.0, deadline - time.monotonic())):
                    return False
            return True
        if self._unacked:
            self.log.flush()
            pending, self._unacked = self._unacked, []
            for entry in pending:
                self._on_ack(entry)
        return True

    def _wait_first(self, timeout: float | None = None) -> bool:
        """Wait for the oldest landing, then acknowledge what has landed; False on timeout.
        A failed landing is raised once: closing after it does not raise it again."""
        try:
            self._landing[0][0].result(timeout)
        except TimeoutError:
            return False
        except BaseException:
            self._landing.popleft()
            raise
        self._acknowledge_landed()
        return True

    def _acknowledge_landed(self) -> None:
        """Acknowledge, in order, what the landing thread has made durable; its failure
        (records that do not match their schema, a full disk) is raised here."""
        while self._landing and self._landing[0][0].done():
            future, entries = self._landing.popleft()
            future.result()
            for entry in entries:
                self._on_ack(entry)

    def close(self) -> None:
        self.flush()
        self.log.close()
