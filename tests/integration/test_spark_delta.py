"""Spark runs in local mode with the Maven-fetched Delta jars: write, read, MERGE."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_delta_write_read_and_merge(spark, tmp_path):
    from delta.tables import DeltaTable

    path = str(tmp_path / "accounts")
    spark.createDataFrame(
        [(1, "alice", 100), (2, "bob", 200), (3, "carol", 300)], "id INT, name STRING, balance INT"
    ).write.format("delta").save(path)

    changes = spark.createDataFrame(
        [(2, "bob", 250, "u"), (3, None, None, "d"), (4, "dave", 400, "c")],
        "id INT, name STRING, balance INT, op STRING",
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(changes.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s.op = 'd'")
        .whenMatchedUpdate(set={"name": "s.name", "balance": "s.balance"})
        .whenNotMatchedInsert(
            condition="s.op <> 'd'", values={"id": "s.id", "name": "s.name", "balance": "s.balance"}
        )
        .execute()
    )

    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "alice", 100), (2, "bob", 250), (4, "dave", 400)]

    history = DeltaTable.forPath(spark, path).history().select("version", "operation").collect()
    assert [(h.version, h.operation) for h in sorted(history)] == [(0, "WRITE"), (1, "MERGE")]
    # Time travel reads the version before the MERGE.
    before = spark.read.format("delta").option("versionAsOf", 0).load(path)
    assert sorted(r.id for r in before.collect()) == [1, 2, 3]


def test_table_checksum_ignores_order_and_bookkeeping(spark, tmp_path):
    from spark_jobs.table_checksum import table_checksum

    a = spark.createDataFrame([(1, "x"), (2, "y")], "id INT, v STRING")
    b = spark.createDataFrame([("y", 2, 7), ("x", 1, 9)], "v STRING, id INT, _cdc_rank INT")
    c = spark.createDataFrame([(1, "x"), (2, "z")], "id INT, v STRING")
    assert table_checksum(a) == table_checksum(b)
    assert table_checksum(a)["rows"] == 2
    assert table_checksum(a) != table_checksum(c)
    assert table_checksum(a.limit(0)) == {"rows": 0, "checksum": 0}


def test_code_generated_for_a_query_is_kept_while_more_than_a_hundred_others_run(spark):
    """One merge batch generates more classes than Spark's default cache of 100 keeps:
    without a larger cache, each batch of a long-running merge compiled its code again
    and warmed the new classes up from scratch (README: "Changed on 2026-12-06 in the
    evening")."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def compiled() -> int:
        return int(metrics.METRIC_COMPILATION_TIME().getCount())

    def run(n: int) -> list:
        # The literal is in the generated code: each n is a class of its own.
        return spark.range(3).selectExpr(f"id * {n + 7} + {n} AS v").collect()

    assert [r.v for r in run(0)] == [0, 7, 14]
    before = compiled()
    for n in range(1, 151):
        run(n)
    assert compiled() - before >= 150  # the others were compiled: the counter counts
    again = compiled()
    assert [r.v for r in run(0)] == [0, 7, 14]
    assert compiled() == again


def test_the_newest_event_per_key_is_picked_by_order_key_in_one_sort(spark):
    """Epoch first, then rank, then total_order, a missing part lowest; whatever the
    events' order in the batch. One sort after the shuffle by key: `max_by` over the
    order key, or Spark's partial top-1 before the shuffle, sorted the batch twice (README:
    "Changed on 2026-12-06 at night")."""
    from spark_jobs.merge.changes import newest_per_key

    rows = spark.createDataFrame(
        [
            (1, "newer epoch", 2, 0, 1),
            (1, "older epoch, higher rank", 1, 9, 9),
            (2, "no epoch", None, 5, 5),
            (2, "epoch 0", 0, 0, 0),
            (3, "same rank, lower order", 4, 4, 1),
            (3, "same rank, higher order", 4, 4, 2),
            (4, None, None, None, None),
            (None, "no key", 1, 1, 1),
            (None, "no key, newer", 1, 1, 2),
        ],
        "id INT, v STRING, _cdc_epoch LONG, _cdc_rank LONG, _cdc_total_order LONG",
    ).repartition(3)
    newest = newest_per_key(rows, ("id",))
    assert newest.columns == rows.columns
    picked = {r.id: r.v for r in newest.collect()}
    assert picked == {
        1: "newer epoch",
        2: "epoch 0",
        3: "same rank, higher order",
        4: None,
        None: "no key, newer",
    }
    plan = newest._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[0]
    assert plan.count("Sort [") == 1, plan
    assert "WindowGroupLimit" not in plan and "Aggregate" not in plan, plan


def test_building_a_column_takes_one_round_trip_to_the_jvm(spark, monkeypatch):
    """PySpark would record the Python call site of every DataFrame and Column call, at
    10 to 20 round trips to the JVM each; a merge batch builds its plans from thousands
    of calls, and spent 0.5 s more outside Spark's jobs (README: "Changed on 2026-12-07")."""
    from py4j.clientserver import ClientServerConnection
    from pyspark.sql import functions as F

    F.col("row")  # PySpark reads the setting with the first call of the process
    sent: list[str] = []
    real = ClientServerConnection.send_command

    def counted(self, command, *args, **kwargs):
        sent.append(command)
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    column = F.col("row").getField("id")
    assert len(sent) <= 4, sent  # the function's lookup, the column, its field
    assert spark.range(1).selectExpr("named_struct('id', 7) AS row").select(column).first()[0] == 7
