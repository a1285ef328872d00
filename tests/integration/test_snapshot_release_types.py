"""Both snapshot release modes give the same Delta table for every column type (DESIGN §4),
and the same as streamed inserts of the same rows.

The all-types table (`tests/support/types_table.py`: every type at its edges, zero dates,
a row of NULLs) in six copies. `jdbc_*` has the columns Spark's JDBC reader reads exactly,
so the Spark chunk job reads it with that reader; `py_*` has a DECIMAL(65,30) and spatial
columns too, so the job reads it with Python on the executors. `*_lake` is released on the
lakehouse fast path (the merge reads the staged Parquet), `*_stream` as op=r events the
streamer makes from the same kind of staged files, and `*_streamed` gets the same rows as
inserts the streamer captures from the binlog. After one merge of the whole event log, the
three Delta tables of each kind must be equal: the same columns with the same types, and
the same values (compared by their repr, so -0.0 is not 0.0 and 1.10 is not 1.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.snapshots import SIGNALS, cleanup, ids, send_signal, wait_caught_up, wait_finished
from tests.support.streamer import admin, start_process, stop_process, wait_for, write_connector
from tests.support.types_table import ROWS, all_types_ddl, insert_all_types

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

KINDS = {"jdbc": False, "py": True}  # the table's kind: whether it has the wide columns
RELEASES = {"lake": "lakehouse", "stream": "stream"}
COPIES = (*RELEASES, "streamed")


def delta_table(spark, root: str, database: str, table: str):
    """The live rows of a Delta table without bookkeeping: (column, type) pairs and the
    rows by id, each value as its repr."""
    from spark_jobs.merge.delta_apply import live_rows

    frame = live_rows(spark, f"{root}/{database}.{table}")
    fields = [f for f in frame.schema.fields if not f.name.startswith("_cdc_")]
    columns = [(f.name, f.dataType.simpleString()) for f in fields]
    rows = {r[0]: tuple(repr(v) for v in r) for r in frame.select(*[f.name for f in fields]).collect()}
    return columns, rows


def differences(names: list[str], left: dict, right: dict) -> list[str]:
    """Each (row id, column) whose values differ, left against right."""
    out = [f"row {i} only in {'left' if i in left else 'right'}" for i in sorted(set(left) ^ set(right))]
    for i in sorted(set(left) & set(right)):
        out += [
            f"{name} of row {i}: {a} != {b}"
            for name, a, b in zip(names, left[i], right[i], strict=True)
            if a != b
        ]
    return out


def test_every_type_lands_alike_from_both_release_modes_and_from_the_stream(
    tmp_path, mariadb_admin_params, scratch_db, spark
):
    from cdc_core.connectors.mysql import jdbc
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for kind, wide in KINDS.items():
            for copy in COPIES:
                cur.execute(all_types_ddl(f"{kind}_{copy}", wide))
            for copy in RELEASES:
                insert_all_types(cur, f"{kind}_{copy}", wide)
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS})
    staging = tmp_path / "staging"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60)
        with db.cursor() as cur:
            for kind, wide in KINDS.items():
                insert_all_types(cur, f"{kind}_streamed", wide)
        for copy, release in RELEASES.items():
            signal_id = ids[f"types-{release}"]
            data = {
                "data-collections": [rf"{scratch_db}\.(jdbc|py)_{copy}"],
                "tidemark.reader": "spark",
                "tidemark.release": release,
                "tidemark.chunk-size": 2,  # windows of one or two rows: columns all NULL in a window
            }
            send_signal(db, signal_id, "execute-snapshot", data)
            job = [
                "--config",
                str(c.path),
                "--signal",
                signal_id,
                "--staging",
                str(staging),
                "--parallelism",
                "2",
            ]
            assert chunk_job(job) == 0
            wait_finished(c, signal_id, 300, f"{release} snapshot")
        wait_caught_up(c, db, 120)
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)

    # The chunk job chose its reader per table: Spark's JDBC reader writes under batch-*.
    staged = set()
    for path in Path(staging).rglob("*.parquet"):
        table = path.relative_to(staging).parts[1].split(".", 1)[1]
        assert ("batch-" in str(path)) == table.startswith("jdbc_"), path
        staged.add(table)
    assert staged == {f"{kind}_{copy}" for kind in KINDS for copy in RELEASES}

    for name in jdbc.SPARK_SQL_CONF:
        spark.conf.unset(name)
    root = str(tmp_path / "delta")
    run_local(spark, c.config(), root, str(tmp_path / "merge-checkpoint"))
    for kind in KINDS:
        tables = {copy: delta_table(spark, root, scratch_db, f"{kind}_{copy}") for copy in COPIES}
        columns, lake = tables["lake"]
        assert len(lake) == len(ROWS)
        for copy in ("stream", "streamed"):
            other = tables[copy][0]
            assert other == columns, f"{kind}_lake != {kind}_{copy}: " + ", ".join(
                f"{a} != {b}" for a, b in zip(columns, other, strict=False) if a != b
            )
        names = [n for n, _ in columns]
        diff = differences(names, lake, tables["stream"][1])
        assert not diff, f"{kind}: the release modes differ (lakehouse != stream):\n" + "\n".join(diff)
        diff = differences(names, lake, tables["streamed"][1])
        # (python-mysql-replication 1.0.17 decodes an empty SET as NULL and complements a
        # negative TIME's fraction; the binlog decoder repairs both, so nothing may differ.)
        assert not diff, f"{kind}: snapshot != streamed:\n" + "\n".join(diff)
