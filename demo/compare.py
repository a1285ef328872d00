"""The source tables next to their Delta tables: row count and checksum of each side.

Both checksums are `spark_jobs.table_checksum` (the sum of a 64-bit hash of each row's
canonical JSON, bookkeeping columns left out), so equal checksums mean equal rows
whatever the order or file layout. The source side is read with the connector's own
column rules applied (the demo hashes customers.email with a salt, as the streamer does)
and rendered with the Delta table's column types, so a value the merge converted
differently shows as a different checksum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.schema.model import TableId


@dataclass
class TableComparison:
    table: str
    source_rows: int
    source_checksum: int | None
    delta_rows: int | None
    delta_checksum: int | None
    note: str = ""

    @property
    def equal(self) -> bool:
        return (
            self.delta_rows == self.source_rows
            and self.source_checksum is not None
            and self.delta_checksum == self.source_checksum
        )


def compare_tables(
    spark: Any, conn: Any, config: ConnectorConfig, database: str, delta_root: str
) -> list[TableComparison]:
    """One comparison per captured table of `database`, in name order."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY 1", (database,)
        )
        captured = TableFilter(config).captures
        tables = [row[0] for row in cur.fetchall() if captured(TableId(database, row[0]))]
    rules = ColumnRules(config)
    return [
        _compare(spark, conn, rules, TableId(database, t), f"{delta_root}/{database}.{t}") for t in tables
    ]


def _compare(spark: Any, conn: Any, rules: ColumnRules, table: TableId, path: str) -> TableComparison:
    from pyspark.sql.types import StructType

    from spark_jobs.merge.delta_apply import live_rows
    from spark_jobs.table_checksum import table_checksum

    columns, rows = source_rows(conn, rules, table)
    try:
        delta = live_rows(spark, path)
    except Exception as exc:  # no Delta table (the merge never wrote it): shown, not raised
        return TableComparison(
            str(table), len(rows), None, None, None, f"no Delta table: {type(exc).__name__}"
        )
    theirs = table_checksum(delta)
    missing = [c for c in columns if c not in delta.columns]
    if missing:
        note = f"columns missing in Delta: {', '.join(missing)}"
        return TableComparison(str(table), len(rows), None, theirs["rows"], theirs["checksum"], note)
    schema = StructType([delta.schema[c] for c in columns])
    ours = table_checksum(spark.createDataFrame(rows, schema=schema))
    return TableComparison(str(table), ours["rows"], ours["checksum"], theirs["rows"], theirs["checksum"])


def source_rows(conn: Any, rules: ColumnRules, table: TableId) -> tuple[list[str], list[tuple]]:
    """The captured columns of every row, with the connector's masks and hashes applied."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table.database}`.`{table.table}`")
        names = [d[0] for d in cur.description]
        raw = cur.fetchall()
    kept = [i for i, name in enumerate(names) if rules.keeps(table, name)]
    steps = {i: [r.apply for r in rules.value_rules(table, names[i])] for i in kept}
    rows = []
    for values in raw:
        row = []
        for i in kept:
            value = values[i]
            for apply in steps[i] if value is not None else ():
                value = apply(value)
            row.append(value)
        rows.append(tuple(row))
    return [names[i] for i in kept], rows


def print_side_by_side(results: list[TableComparison]) -> None:
    print(
        f"\n{'table':24s} {'source rows':>11s} {'source checksum':>22s} {'Delta rows':>11s} {'Delta checksum':>22s}  equal"
    )
    for r in results:
        print(
            f"{r.table:24s} {r.source_rows:11d} {_num(r.source_checksum):>22s} {_num(r.delta_rows):>11s} "
            f"{_num(r.delta_checksum):>22s}  {'yes' if r.equal else 'NO'}"
            + (f"  ({r.note})" if r.note else "")
        )


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
