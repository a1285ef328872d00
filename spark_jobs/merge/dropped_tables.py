"""DROP TABLE landed: a dropped table's rows end where the source dropped it.

A drop is a schema change on the `<prefix>` topic (so are a rename, whose old name holds
no rows after it, MariaDB's CREATE OR REPLACE of an existing table, and a dropped or
renamed MongoDB collection), not an event of the table's own topic, so the table's events
alone never tell the merge its rows are gone. The streamer puts the change's order key
and the tables it ends on its record as headers (`ORDER_HEADER`, `ENDS_HEADER`, from
`SchemaChange.order` and `.ends`; the value stays Debezium's); here each ended table gets
a truncation mark at that order key (`spark_jobs.merge.truncation`). Everything the mark
does for a truncate it does here: the rows stored before it end (tombstones at the mark,
`_cdc_op` `t`; an SCD2 table's current versions closed), and events older than it, in
this batch or a later one, stay out, while a table created again under the name lands
its rows after it.

The topic holds one record per DDL and is read whole before each batch, as the schemas
topic is (`schema_catalogue`): a mark already kept by the table changes nothing. A record
without the headers (written by a streamer before them, or by a source whose schema
changes have no single order, Vitess's per-shard DDL) ends nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import ENDS_HEADER, ORDER_HEADER
from cdc_core.sinks.local_log import LocalEventLogReader
from spark_jobs.merge.truncation import Mark

Drops = dict[str, list[Mark]]  # table (`db.table`) → the marks that end its rows, oldest first
Header = bytes | str | None


def _text(value: Header) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def drops_of(records: Iterable[tuple[Header, Header, Header]]) -> Drops:
    """The ended tables in schema-change records given as (value, order header, ends
    header)."""
    drops: Drops = {}
    for value, order, ends in records:
        text, header, names = _text(value), _text(order), _text(ends)
        if text is None or header is None or names is None:
            continue
        try:
            record = json.loads(text)
            epoch, rank = (int(n) for n in header.split(","))
            tables = [f"{database}.{table}" for database, table in json.loads(names)]
            ts_ms = int(record.get("ts_ms") or 0)
            txn_id = (record.get("source") or {}).get("gtid")
        except (ValueError, AttributeError, TypeError) as exc:
            raise TidemarkError(
                f"a record on the schema-change topic is not a schema change with its order: {text[:200]!r}"
            ) from exc
        for table in tables:
            drops.setdefault(table, []).append(Mark((epoch, rank, 0), ts_ms, txn_id))
    return {table: sorted(set(marks)) for table, marks in drops.items()}


def with_drops(marks: dict[str, list[Mark]], drops: Drops, prefix: str) -> dict[str, list[Mark]]:
    """The batch's truncation marks per topic (`truncation.batch_marks`) with the drops:
    a drop is the table's truncate."""
    out = dict(marks)
    for name, dropped in drops.items():
        out[f"{prefix}.{name}"] = sorted({*marks.get(f"{prefix}.{name}", ()), *dropped})
    return out


def local_drops(log_root: Path, prefix: str) -> tuple[Drops, dict[str, int]]:
    """The drops in the embedded log, and the topic's last offset (`{prefix: offset}`,
    empty before its first record), so a run can tell whether a schema change came since
    the last."""
    if not (Path(log_root) / prefix).is_dir():
        return {}, {}
    records = list(LocalEventLogReader(Path(log_root)).read(prefix))
    last = {prefix: records[-1].offset} if records else {}
    return drops_of((r.value, r.headers.get(ORDER_HEADER), r.headers.get(ENDS_HEADER)) for r in records), last


def kafka_drops(spark: SparkSession, servers: str, prefix: str) -> Drops:
    """The schema-change topic read whole as a batch (none yet: no drops)."""
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("includeHeaders", "true")
        .option("subscribePattern", f"^{re.escape(prefix)}$")  # searched for in topic names: anchored
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    order, ends = (
        F.expr(f"try_element_at(filter(headers, h -> h.key = '{name}'), 1).value").cast("string")
        for name in (ORDER_HEADER, ENDS_HEADER)
    )
    rows = frame.where(ends.isNotNull()).select(F.col("value").cast("string"), order, ends).collect()
    return drops_of((r[0], r[1], r[2]) for r in rows)
