"""Incremental snapshots under column rules (exclusion, truncation, masks, hashes) through
the Spark chunk job, in both release modes, merged into Delta.

Four copies of one table: `jdbc_*` with rules Spark applies itself (read by Spark's JDBC
reader), `py_*` with hashes over a DATETIME and a DECIMAL too, whose event forms only the
Python reader computes. `*_lake` is released on the lakehouse fast path (the merge reads
the staged Parquet), `*_stream` as op=r events made from the same kind of staged files.
Both Delta tables must equal the source shaped as the streamer shapes events, and no
staged file may hold a raw value of a column the rules hide."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
from pathlib import Path

import pytest

from tests.support.snapshots import SIGNALS, cleanup, ids, send_signal, wait_finished
from tests.support.streamer import admin, start_process, stop_process, wait_for, write_connector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

TABLES = ("jdbc_lake", "jdbc_stream", "py_lake", "py_stream")
ROWS = 600
SALT = "s4lt"
NAMES = ("Zoë 🐚 Quinn", "Ann", "Bartholomew", "李小龍")
EPOCH = dt.datetime(1970, 1, 1)


def source_row(i: int) -> tuple:
    """Row `i`: every sensitive value distinct and unlike any other column's."""
    blank = i % 7 == 0  # NULLs in every nullable column now and then
    return (
        i,
        None if blank else f"person{i}@example.com",
        None if blank else f"{NAMES[i % len(NAMES)]} {i}",
        None if blank else f"s3cr3t-{i}",
        None if blank else 70_000 + i,
        None if blank else -(80_000 + i),
        f"private note {i}",
        f"123-45-{i:04d}",
        None if blank else decimal.Decimal(f"{5000 + i}.25"),
        dt.datetime(2020, 1, 1) + dt.timedelta(hours=i, seconds=i),
        f"city {i % 13}",
    )


def rules(db: str) -> dict[str, str]:
    every = rf"{db}\.(jdbc|py)_(lake|stream)"
    py = rf"{db}\.py_(lake|stream)"
    return {
        "column.exclude.list": rf"{every}\.(notes|ssn)",
        f"column.mask.hash.SHA-256.with.salt.{SALT}": rf"{every}\.email|{py}\.(amount|born)",
        f"column.mask.hash.MD5.with.salt.{SALT}": rf"{every}\.score",
        "column.truncate.to.4.chars": rf"{every}\.name",
        "column.mask.with.6.chars": rf"{every}\.secret|{db}\.jdbc_(lake|stream)\.amount",
        "column.mask.with.4.chars": rf"{every}\.pin",
    }


def digest(alg: str, value) -> str | None:
    return None if value is None else hashlib.new(alg, (SALT + str(value)).encode()).hexdigest()


def shaped(table: str, row: tuple) -> tuple:
    """What the events carry of a source row (the streamer's rules, written out by hand):
    notes and ssn dropped; a DECIMAL(10,2)'s event form is its unscaled value in base64,
    a DATETIME's its epoch milliseconds."""
    from cdc_core.connectors.mysql.types import TypeModes, map_column
    from cdc_core.schema.model import Column

    i, email, name, secret, pin, score, _notes, _ssn, amount, born, city = row
    python = table.startswith("py_")
    if python:
        decimal_text = map_column(Column("amount", "DECIMAL", 10, 2), TypeModes()).convert
        amount = digest("sha256", None if amount is None else decimal_text(amount))
        born = digest("sha256", int((born - EPOCH).total_seconds() * 1000))
    else:
        amount = None if amount is None else "******"
    return (
        i,
        digest("sha256", email),
        None if name is None else name[:4],
        None if secret is None else "******",
        None if pin is None else "****",
        digest("md5", score),
        amount,
        born,
        city,
    )


COLUMNS = ["id", "email", "name", "secret", "pin", "score", "amount", "born", "city"]


def hidden_values(table: str, row: tuple) -> set[str]:
    """The raw values of a row that no staged file may hold (as text)."""
    _id, email, _name, secret, pin, score, notes, ssn, amount, born, _city = row
    hidden = {email, secret, pin, score, notes, ssn, amount}
    if table.startswith("py_"):
        hidden.add(born)
    return {str(v) for v in hidden if v is not None}


def test_staged_rows_carry_the_column_rules_and_both_release_modes_give_the_shaped_source(
    tmp_path, mariadb_admin_params, scratch_db, spark
):
    import pyarrow.parquet as pq

    from cdc_core.connectors.mysql import jdbc
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job
    from tests.support.lakehouse import delta_rows

    db = admin(mariadb_admin_params, scratch_db)
    rows = [source_row(i) for i in range(1, ROWS + 1)]
    with db.cursor() as cur:
        for table in TABLES:
            cur.execute(
                f"CREATE TABLE {table} (id INT PRIMARY KEY, email VARCHAR(80), name VARCHAR(40), "
                "secret VARCHAR(40), pin INT, score INT, notes TEXT, ssn CHAR(11), amount DECIMAL(10,2), "
                "born DATETIME NOT NULL, city VARCHAR(20)) DEFAULT CHARSET=utf8mb4"
            )
            cur.executemany(f"INSERT INTO {table} VALUES ({', '.join(['%s'] * 11)})", rows)
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS, **rules(scratch_db)})
    staging = tmp_path / "staging"
    args = ["--config", str(c.path), "--staging", str(staging), "--parallelism", "2"]
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60)
        for mode in ("lakehouse", "stream"):
            signal_id = ids[f"rules-{mode}"]
            collections = [rf"{scratch_db}\.(jdbc|py)_{mode[:4]}.*"]
            send_signal(
                db,
                signal_id,
                "execute-snapshot",
                {
                    "data-collections": collections,
                    "tidemark.reader": "spark",
                    "tidemark.release": mode,
                    "tidemark.chunk-size": 150,
                },
            )
            assert chunk_job([*args, "--signal", signal_id]) == 0
            wait_finished(c, signal_id, 300, f"{mode} snapshot")
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)

    # Staging: only what the events carry; Spark's files for jdbc_*, the Python reader's for py_*.
    staged = sorted(Path(staging).rglob("*.parquet"))
    by_table: dict[str, list[Path]] = {t: [] for t in TABLES}
    for path in staged:
        by_table[path.relative_to(staging).parts[1].split(".", 1)[1]].append(path)
    for table, files in by_table.items():
        assert files, f"nothing staged for {table}"
        spark_written = table.startswith("jdbc_")
        assert all(("batch-" in str(f)) == spark_written for f in files), files
        hidden = set().union(*(hidden_values(table, r) for r in rows))
        for path in files:
            content = pq.read_table(path)
            assert content.column_names == COLUMNS
            values = {str(v) for column in content.columns for v in column.to_pylist() if v is not None}
            leaked = values & hidden
            assert not leaked, f"{path} holds raw values: {sorted(leaked)[:5]}"

    # Delta: both release modes give the source as the events carry it.
    for name in jdbc.SPARK_SQL_CONF:
        spark.conf.unset(name)
    root = tmp_path / "delta"
    run_local(spark, c.config(), str(root), str(tmp_path / "merge-checkpoint"))
    for kind in ("jdbc", "py"):
        expected = sorted(shaped(f"{kind}_lake", r) for r in rows)
        lake = delta_rows(spark, str(root), scratch_db, f"{kind}_lake", COLUMNS)
        stream = delta_rows(spark, str(root), scratch_db, f"{kind}_stream", COLUMNS)
        assert lake == stream, f"{kind}: the lakehouse and stream Delta tables differ"
        assert lake == expected, f"{kind}: Delta is not the shaped source"
        for table in (f"{kind}_lake", f"{kind}_stream"):
            stored = spark.read.format("delta").load(f"{root}/{scratch_db}.{table}")
            assert [c for c in stored.columns if not c.startswith("_cdc_")] == COLUMNS
