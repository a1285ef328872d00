"""The embedded log's writers, one per format, for tests that run on each."""

from __future__ import annotations

import os

from cdc_core.sinks.local_log import LocalEventLog
from cdc_core.sinks.parquet_log import ParquetEventLog

WRITERS = {"parquet": ParquetEventLog, "json": LocalEventLog}  # `sink.local.format` -> writer


def killed(log: ParquetEventLog | LocalEventLog) -> None:
    """The writer gone as after `kill -9`: what it flushed is on disk, nothing more runs."""
    if isinstance(log, ParquetEventLog):
        log._landing.shutdown()
    else:
        for topic_writer in log._writers.values():
            os.close(topic_writer.fd)
    log._lock.release()
