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
    from spark_jobs.merge.delta_apply import live_rows

    db = admin(params, database)
    try:
        for table in tables:
            with db.cursor() as cur:
                cur.execute(f"SELECT * FROM `{table}`")
                columns = [d[0] for d in cur.description]
                source = sorted(tuple(r) for r in cur.fetchall())
            frame = live_rows(spark, f"{root}/{database}.{table}").select(*columns)
            delta = sorted(tuple(r) for r in frame.collect())
            assert delta == source, f"{table}: Delta has {len(delta)} rows, the source {len(source)}"
    finally:
        db.close()
