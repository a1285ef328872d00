"""The lakehouse end of a test: merge the connector's event log into Delta and compare
every table with the source."""

from __future__ import annotations

from typing import Any

from tests.support.streamer import Connector, admin


def merge_and_compare(
    spark, connector: Connector, params: dict[str, Any], database: str, tables: list[str], tmp_path
) -> None:
    """Run the Delta merge over the embedded log (one available-now batch) and assert each
    table's live rows equal the source's, column for column."""
    from spark_jobs.delta_merge import run_local

    root, checkpoint = tmp_path / "delta", tmp_path / "merge-checkpoint"
    run_local(spark, connector.config(), str(root), str(checkpoint))
    assert_delta_equals_source(spark, str(root), params, database, tables)


def assert_delta_equals_source(
    spark, root: str, params: dict[str, Any], database: str, tables: list[str]
) -> None:
    """Each table's live Delta rows under `root` equal the source table's, column for column."""
    for table in tables:
        columns, source = source_rows(params, database, table)
        delta = delta_rows(spark, root, database, table, columns)
        assert delta == source, f"{table}: Delta has {len(delta)} rows, the source {len(source)}"


def source_rows(params: dict[str, Any], database: str, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The column names and the sorted rows of a source table."""
    db = admin(params, database)
    try:
        with db.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            return [d[0] for d in cur.description], sorted(tuple(r) for r in cur.fetchall())
    finally:
        db.close()


def delta_rows(spark, root: str, database: str, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """The sorted live rows of a table's Delta copy under `root`, as `columns`."""
    from spark_jobs.merge.delta_apply import live_rows

    frame = live_rows(spark, f"{root}/{database}.{table}").select(*columns)
    return sorted(tuple(r) for r in frame.collect())
