"""The merges the merge benchmark times (`bench.merge_throughput`): Tidemark's, its JSON
floor and a bare Delta MERGE, on fresh shallow clones of a prepared table."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import straightforward_merge
from bench.merge_inputs import FIELDS, PREFIX, TOPIC, transaction_schema_text, value_schema_text


def json_floor(spark, read: Callable[[], Any]) -> float:
    """Seconds to read the batch's records and parse every payload into the types the
    merge parses it into, and nothing else: each payload is cut out at its schema's known
    length (no search, no check), then parsed (no cache, no alignment, no deduplication,
    no MERGE), by the merge's own JSON reader. Any merge of these records has to read and
    parse them at least once, so no merge of them can take less than the bare MERGE plus
    this."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs.merge.connect_types import json_type
    from spark_jobs.merge.cutting import CUT, OPEN, bytes_between
    from spark_jobs.merge.json_reader import from_json
    from spark_jobs.merge.records import PAYLOAD, envelope_type

    image = T.StructType([T.StructField(f["field"], json_type(f)) for f in FIELDS])
    change = F.col("topic") == TOPIC
    starts = [len((OPEN + text + CUT).encode()) for text in (value_schema_text(), transaction_schema_text())]
    at = F.when(change, F.lit(starts[0])).otherwise(F.lit(starts[1]))
    started = time.perf_counter()
    cut = read().select("topic", "value", at.alias("at"))
    payload = bytes_between("at + 1", "octet_length(value) - at - 1")
    parsed = cut.select("topic", payload.alias("payload")).select(
        F.when(change, from_json(spark, F.col("payload"), envelope_type(image))).alias("change"),
        F.when(~change, from_json(spark, F.col("payload"), PAYLOAD)).alias("boundary"),
    )
    parsed.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def clone(spark, source: str, target: str) -> None:
    spark.sql(f"CREATE TABLE delta.`{target}` SHALLOW CLONE delta.`{source}`")


class Phases(logging.Handler):
    """Seconds per phase of a merge (parse, align, merge, hold), from the merge's own log
    records (`spark_jobs.delta_merge._phase`)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        phase = getattr(record, "phase", None)
        if phase:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + float(getattr(record, "seconds", 0.0))


def tidemark_merge(
    spark,
    read: Callable[[], Any],
    root: str,
    catalogue: dict[str, tuple[str, str]] | None = None,
    embedded_log: str | None = None,
) -> tuple[float, float, dict[str, float]]:
    """Seconds for the whole batch, of them the MERGE statement's own (from the commit's
    metrics), and each phase's. The offsets reached come from the records when they carry
    them (Kafka), as in the merge job. `catalogue`: the schemas schemaless records name.
    `embedded_log`: read the batch from this embedded log (either format) instead, as the
    merge job does (`read` unused)."""
    from delta.tables import DeltaTable

    from spark_jobs.delta_merge import apply_aligned
    from spark_jobs.merge.known_schemas import KnownSchemas
    from spark_jobs.merge.transactions import PendingStore

    known = KnownSchemas()
    known.refer(catalogue or {})

    phases = Phases()
    merge_log = logging.getLogger("spark_jobs.delta_merge")
    merge_log.setLevel(logging.INFO)
    merge_log.addHandler(phases)
    try:
        started = time.perf_counter()
        typed, whole = [], False
        if embedded_log is not None:  # as `delta_merge.run_local` reads it: up to its cut
            from spark_jobs.local_log_source import read_local_log
            from spark_jobs.merge.log_range import plan_range

            topics = [TOPIC, f"{PREFIX}.transaction"]
            span = plan_range(Path(embedded_log), topics, {}, None, False)
            batch, typed = read_local_log(spark, embedded_log, topics, {}, until=span.until)
            whole = span.whole
            if not whole:
                print(
                    "  WARNING: the embedded log's cuts do not enclose whole transactions: aligned",
                    flush=True,
                )
        else:
            batch = read()
        reached = None if "offset" in batch.columns and embedded_log is None else {}
        held = PendingStore(spark, f"{root}/_held")
        apply_aligned(spark, batch, root, PREFIX, reached, held, 1, known=known, typed=typed, whole=whole)
        took = time.perf_counter() - started
    finally:
        merge_log.removeHandler(phases)
    last = DeltaTable.forPath(spark, f"{root}/bench.t").history(1).collect()[0]
    return took, int(last.operationMetrics["executionTimeMs"]) / 1000, phases.seconds


def bare_merge(spark, deduped: str, path: str) -> float:
    from delta.tables import DeltaTable

    started = time.perf_counter()
    source = spark.read.parquet(deduped)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s._cdc_op = 'd'")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition="s._cdc_op <> 'd'")
        .execute()
    )
    return time.perf_counter() - started


@dataclass
class Runs:
    """One round of every merge the benchmark compares, each on a fresh clone of `base`."""

    spark: Any
    work: Path
    base: str
    read: Callable[[], Any]
    read_loose: Callable[[], Any]
    catalogue: dict[str, tuple[str, str]]
    log: str
    lines_log: str
    deduped: str

    def once(
        self, size: int, tag: str, check: bool = False
    ) -> tuple[float, float, dict[str, float], list[float]]:
        """(Tidemark's seconds, its MERGE's, its phases, [schemaless, binary log, JSON-lines
        log, bare MERGE, straightforward merge, JSON floor]); `check`: the tables compared
        (a difference is printed as a warning)."""
        spark, run = self.spark, self.work / "run"
        shutil.rmtree(run, ignore_errors=True)  # also what an interrupted run left
        roots = {k: str(run / f"{k}-{size}-{tag}") for k in ("ours", "schemaless", "binary", "json-lines")}
        bare_path, plain_path = str(run / f"bare-{size}-{tag}"), str(run / f"plain-{size}-{tag}")
        for root in roots.values():
            clone(spark, self.base, f"{root}/bench.t")
        clone(spark, self.base, bare_path)
        clone(spark, self.base, plain_path)
        took, merge_part, phases = tidemark_merge(spark, self.read, roots["ours"])
        others = [
            tidemark_merge(spark, self.read_loose, roots["schemaless"], self.catalogue)[0],
            tidemark_merge(spark, self.read, roots["binary"], embedded_log=self.log)[0],
            tidemark_merge(spark, self.read, roots["json-lines"], embedded_log=self.lines_log)[0],
            bare_merge(spark, self.deduped, bare_path),
            straightforward_merge.merge(spark, self.read, plain_path, TOPIC),
            json_floor(spark, self.read),
        ]
        if check:
            ours = f"{roots['ours']}/bench.t"
            live = spark.read.format("delta").load(ours).where("NOT _cdc_deleted").count()
            floor = spark.read.format("delta").load(bare_path).count()
            if live != floor:
                print(f"  WARNING: the merged table has {live:,} live rows, the bare MERGE's {floor:,}")
            for other, what in (
                (plain_path, "Tidemark's table and the straightforward merge's"),
                (f"{roots['schemaless']}/bench.t", "the tables merged from JSON with and without schemas"),
                (f"{roots['binary']}/bench.t", "the tables merged from JSON and from the binary log"),
                (f"{roots['json-lines']}/bench.t", "the tables merged from JSON and from the JSON-lines log"),
            ):
                if not straightforward_merge.same_table(spark, ours, other):
                    print(f"  WARNING: {what} differ")
        shutil.rmtree(run, ignore_errors=True)
        return took, merge_part, phases, others
