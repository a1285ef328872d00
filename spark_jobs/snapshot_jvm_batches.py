"""The Spark chunk job's JVM path: a table's windows read by the connector's Spark reader,
a batch of windows per Spark read, one Parquet file per window."""

from __future__ import annotations

import logging
import re
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from cdc_core.connector import SourceSession, SparkWindowReader
from cdc_core.errors import TidemarkError
from cdc_core.signals.conditions import condition_fields, parse_condition
from cdc_core.snapshot.chunks import ChunkPlan
from cdc_core.snapshot.keycodec import decode_key
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import filesystem_for
from spark_jobs import staged_types
from spark_jobs.snapshot_windows import close_window, open_window, table_staging
from spark_jobs.staged_rules import staged_expressions

log = logging.getLogger(__name__)


class JvmBatches:
    """One table's windows through the connector's Spark reader, a batch at a time, two batches in
    flight: while Spark reads batch k, the driver closes batch k-1 and opens batch k+1, so
    the executors never wait for the driver's watermark writes nor idle at a batch's tail.

    A batch is every LW, then one read with a partition per window (rows decoded in the
    JVM, written as one Parquet file per partition, which Spark names by partition number:
    no partitioned write, whose sort would cost a fifth of the read), then every HW naming
    its window's file. Windows stay open for their batch's read, which the protocol allows: each
    records only its own key range. Watermarks are written from this thread only, in batch
    order; Spark jobs are submitted from a worker thread."""

    def __init__(
        self,
        spark: Any,
        source: SourceSession,
        reader: SparkWindowReader,
        form: StagedForm,
        signal_id: str,
        staging: str,
        lakehouse: bool = False,
        partition: str | None = None,
        close_by_delete: bool = False,
    ) -> None:
        self.spark, self.source, self.form, self.signal_id = spark, source, form, signal_id
        self.lakehouse = lakehouse  # staged as the Delta table holds them, not as read
        self.schema = form.schema
        self.columns = list(self.schema.column_names)
        self.reader = reader
        self.partition = partition
        self.staging = table_staging(staging, signal_id, self.schema.id, partition)
        self.note_folder = self.staging if close_by_delete else None  # insert_delete: close notes here

    def run(self, windows: list[dict[str, Any]], per_batch: int) -> list[dict[str, Any]]:
        batches = [windows[i : i + per_batch] for i in range(0, len(windows), per_batch)]
        results: list[dict[str, Any]] = []
        in_flight: list[
            tuple[list[dict[str, Any]], list[tuple[str, str | None]], str, float, Future[None]]
        ] = []
        with ThreadPoolExecutor(2, thread_name_prefix="spark-read") as pool:
            try:
                for batch in batches:
                    if len(in_flight) == 2:
                        results += self._close(*in_flight.pop(0))
                    began = time.monotonic()
                    window_ids = [
                        open_window(self.source, self.signal_id, w, self.note_folder) for w in batch
                    ]
                    base = f"{self.staging}/batch-{uuid.uuid4().hex[:12]}"
                    in_flight.append((batch, window_ids, base, began, pool.submit(self._read, batch, base)))
                while in_flight:
                    results += self._close(*in_flight.pop(0))
            except BaseException:
                for *_, future in in_flight:  # no HW for a window whose read failed or was not awaited
                    future.cancel()
                raise
        return results

    def _read(self, batch: list[dict[str, Any]], base: str) -> None:
        text = batch[0]["condition"]
        condition = parse_condition(text, condition_fields(self.schema)) if text else None
        plan = ChunkPlan(self.schema, tuple(batch[0]["key"]), condition, self.partition)
        spans = [(decode_key(w["lo"]), decode_key(w["hi"])) for w in batch]
        frame = self.reader.read(self.spark, self.form, plan, spans)
        # Only the staged columns are read (Spark prunes the others from the query), and the
        # column rules apply in the JVM before anything is written.
        shaped, unsupported = staged_expressions(self.form)
        assert not unsupported, unsupported  # such tables go to the Python reader
        staged = [shaped[c] if c in shaped else self._staged(frame, c) for c in self.form.columns]
        frame.select(*staged).write.option("maxRecordsPerFile", 0).parquet(base)

    def _staged(self, frame: Any, name: str) -> Any:
        column = self.schema.column(name)
        assert column is not None
        return self.reader.staged_column(frame, column, self.form.mappings[name], self.lakehouse)

    def _close(
        self,
        batch: list[dict[str, Any]],
        window_ids: list[tuple[str, str | None]],
        base: str,
        began: float,
        reading: Future[None],
    ) -> list[dict[str, Any]]:
        reading.result()
        staged = staged_files(base)
        results = []
        for index, (w, (window_id, note)) in enumerate(zip(batch, window_ids, strict=True)):
            uri, rows = staged.get(index, (f"{base}/part-{index:05d}-empty.parquet", 0))
            if index not in staged:  # Spark writes no file for an empty partition
                staged_types.write_window(uri, self.form, [], self.lakehouse)
            close_window(self.source, self.signal_id, window_id, self.form, rows, uri, self.partition, note)
            results.append({"table": w["table"], "index": w["index"], "rows": rows, "staged": uri})
        log.info(
            "%s: windows %d-%d, %d rows staged in %.1fs",
            self.schema.id,
            batch[0]["index"],
            batch[-1]["index"],
            sum(r["rows"] for r in results),
            time.monotonic() - began,
        )
        return results


def staged_files(base: str) -> dict[int, tuple[str, int]]:
    """Each partition's Parquet file under `base` and its row count (from the footer).
    Spark names a task's output `part-NNNNN-...` by its partition number; a file named
    otherwise, or a second file for one partition, is an error rather than a guess."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    filesystem, path = filesystem_for(base)
    staged: dict[int, tuple[str, int]] = {}
    for info in filesystem.get_file_info(fs.FileSelector(path)):
        name = info.base_name
        if info.type != fs.FileType.File or name.startswith(("_", ".")):
            continue
        match = _PART_FILE.fullmatch(name)
        if match is None or int(match[1]) in staged:
            raise TidemarkError(f"unexpected file {name} among the staged windows in {base}")
        rows = pq.read_metadata(info.path, filesystem=filesystem).num_rows
        staged[int(match[1])] = (f"{base}/{name}", rows)
    return staged


_PART_FILE = re.compile(r"part-(\d{5,})-[^/]*\.parquet")
