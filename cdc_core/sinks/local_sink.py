"""The embedded event log as a sink: records are acknowledged when fsync returns."""

from __future__ import annotations

from pathlib import Path

from cdc_core.events.envelope import Record
from cdc_core.sinks.base import AckCallback
from cdc_core.sinks.local_log import LocalEventLog


class LocalLogSink:
    def __init__(
        self,
        directory: Path,
        on_ack: AckCallback,
        parquet: bool = False,
        key_schemas: bool = True,
        value_schemas: bool = True,
    ) -> None:
        if parquet:
            from cdc_core.sinks.parquet_log import ParquetEventLog

            self.log: LocalEventLog | ParquetEventLog = ParquetEventLog(directory, key_schemas, value_schemas)
        else:
            self.log = LocalEventLog(directory)
        self._on_ack = on_ack
        self._unacked: list[int] = []

    def send(self, records: list[tuple[Record, int]]) -> None:
        self.log.append(r for r, _ in records)
        self._unacked.extend(entry for _, entry in records)

    def poll(self) -> None:
        # One fsync per dispatched batch: durable before acknowledged.
        if self._unacked:
            self.flush()

    def flush(self, timeout: float | None = None) -> bool:
        if self._unacked:
            self.log.flush()
            pending, self._unacked = self._unacked, []
            for entry in pending:
                self._on_ack(entry)
        return True

    def close(self) -> None:
        self.flush()
        self.log.close()
