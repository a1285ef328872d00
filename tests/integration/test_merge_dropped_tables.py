"""A dropped table lands dropped: its rows end at the drop, and a table created again under
its name holds only its own rows (`spark_jobs.merge.dropped_tables`)."""

from __future__ import annotations

import json

import pytest

from cdc_core.errors import TidemarkError
from spark_jobs.merge.dropped_tables import drops_of
from spark_jobs.merge.truncation import Mark

_DDL = json.dumps({"source": {"gtid": "0-1-9"}, "ts_ms": 1700, "ddl": "DROP TABLE ...", "tableChanges": []})


def test_each_ended_table_takes_the_order_key_of_its_schema_change():
    records = [
        (_DDL, b"0,42", b'[["shop","orders"],["shop","old"]]'),
        (_DDL.encode(), "1,3", '[["shop","orders"]]'),
        (_DDL, b"0,44", None),  # an ALTER: it ends no table
        (_DDL, None, b'[["shop","gone"]]'),  # no order: nothing to end the rows at
        (None, b"0,50", b'[["shop","x"]]'),
    ]
    assert drops_of(records) == {
        "shop.orders": [Mark((0, 42, 0), 1700, "0-1-9"), Mark((1, 3, 0), 1700, "0-1-9")],
        "shop.old": [Mark((0, 42, 0), 1700, "0-1-9")],
    }
    assert drops_of([(_DDL, b"2,7", b'[["a.b","c"]]')]) == {"a.b.c": [Mark((2, 7, 0), 1700, "0-1-9")]}


def test_a_schema_change_record_that_is_not_one_is_refused():
    for record in (("not json", b"0,1", b"[]"), (_DDL, b"0", b"[]"), (_DDL, b"0,1", b'["a"]')):
        with pytest.raises(TidemarkError, match="schema-change topic"):
            drops_of([record])


@pytest.mark.parametrize(("batches", "log_format"), [("one batch", "parquet"), ("a batch per step", "json")])
def test_tables_dropped_and_created_again_at_the_source_land_equal(
    tmp_path, mariadb_admin_params, scratch_db, spark, batches, log_format
):
    """MariaDB: a table dropped and created again with another column, its old ids
    reused; a table replaced (CREATE OR REPLACE); two swapped by a RENAME, every row then
    updated (the rows moved in land with the updates); a table dropped for good (last, with
    nothing after it); merged in one batch (the embedded log in Parquet) or one per step
    (in JSON lines), then all of it again from the start (a lost checkpoint): Delta equals
    the source every time, and the dropped table holds no live row."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.merge.delta_apply import live_rows
    from tests.support.lakehouse import assert_delta_equals_source
    from tests.support.streamer import (
        admin,
        payloads,
        read_log,
        running_in_process,
        topic,
        wait_for,
        write_connector,
    )

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("CREATE TABLE gone (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(10))")
        for name in ("p", "q"):
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(10))")
    connector = write_connector(
        tmp_path, scratch_db, {"database.server.id": 6404, "sink.local.format": log_format}
    )
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    steps = [
        [
            "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')",
            "DELETE FROM t WHERE id=3",
            "INSERT INTO gone VALUES (1,'x'),(2,'y')",
            "INSERT INTO r VALUES (1,'r1'),(2,'r2')",
            "INSERT INTO p VALUES (1,'p1'),(2,'p2')",
            "INSERT INTO q VALUES (11,'q1'),(12,'q2')",
        ],
        [
            "UPDATE t SET v='late' WHERE id=2",
            "DROP TABLE t",
            "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n INT)",
            "CREATE OR REPLACE TABLE r (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO r VALUES (2,'again')",
            "RENAME TABLE p TO swap, q TO p, swap TO q",  # each name now holds the other's rows
            "UPDATE p SET v = 'moved'",
            "UPDATE q SET v = 'moved'",
            "INSERT INTO t VALUES (1,'new',10),(4,'d',40)",
        ],
        ["UPDATE t SET n=11 WHERE id=1", "DROP TABLE gone"],
    ]

    def seen(table: str, **after: object) -> bool:
        events = payloads(connector, topic(connector, scratch_db, table))
        return any(after.items() <= (e.get("after") or {}).items() for e in events)

    def dropped(table: str) -> bool:
        changes = [(v or {}).get("tableChanges") or [] for _, v, _ in read_log(connector, connector.prefix)]
        return any(c["type"] == "DROP" and c["id"].endswith(f'."{table}"') for cs in changes for c in cs)

    waits = [lambda: seen("gone", id=2), lambda: seen("t", id=4, n=40), lambda: dropped("gone")]
    with running_in_process(connector):
        for step, wait in zip(steps, waits, strict=True):
            with db.cursor() as cur:
                for sql in step:
                    cur.execute(sql)
            wait_for(wait, 60)
            if batches == "a batch per step":
                run_local(spark, connector.config(), root, checkpoint)
    if batches == "one batch":
        run_local(spark, connector.config(), root, checkpoint)
    for check in (checkpoint, str(tmp_path / "lost-checkpoint")):
        if check != checkpoint:
            run_local(spark, connector.config(), root, check)
        assert_delta_equals_source(spark, root, mariadb_admin_params, scratch_db, ["t", "r", "p", "q"])
        assert live_rows(spark, f"{root}/{scratch_db}.gone").count() == 0


def test_a_drop_read_from_kafka_ends_the_rows_even_with_nothing_after_it(
    tmp_path, mariadb_admin_params, scratch_db, spark, kafka_bootstrap
):
    """Kafka: the schema-change topic is read beside the tables', and a drop that is the
    last record starts a batch of its own."""
    from spark_jobs.delta_merge import run_kafka
    from spark_jobs.merge.delta_apply import live_rows
    from tests.support.kafka import read_topic
    from tests.support.lakehouse import assert_delta_equals_source
    from tests.support.streamer import admin, kafka_connector, running_in_process, wait_for

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("CREATE TABLE gone (id INT PRIMARY KEY, v VARCHAR(10))")
    c = kafka_connector(tmp_path, scratch_db, kafka_bootstrap, "drops", {"database.server.id": 6405})
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")

    def in_kafka(table: str) -> int:
        return len(read_topic(kafka_bootstrap, f"{c.prefix}.{scratch_db}.{table}"))

    def drops_in_kafka() -> int:
        values = [v for _, v in read_topic(kafka_bootstrap, c.prefix)]
        return sum(ch["type"] == "DROP" for v in values for ch in (v or {}).get("tableChanges") or [])

    with running_in_process(c):
        with db.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (1,'a'),(2,'b')")
            cur.execute("INSERT INTO gone VALUES (1,'x')")
            cur.execute("DROP TABLE t")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("INSERT INTO t VALUES (2,'new')")
        # Kafka orders records within a partition only: `gone`'s insert, produced before
        # t's last record, can still become readable after it (its topic is new).
        wait_for(lambda: in_kafka("t") >= 3 and in_kafka("gone") >= 1, 60)
        run_kafka(spark, c.config(), root, checkpoint, "available-now")
        assert_delta_equals_source(spark, root, mariadb_admin_params, scratch_db, ["t"])
        assert live_rows(spark, f"{root}/{scratch_db}.gone").count() == 1
        with db.cursor() as cur:
            cur.execute("DROP TABLE gone")
        wait_for(lambda: drops_in_kafka() >= 2, 60)
    run_kafka(spark, c.config(), root, checkpoint, "available-now")
    assert live_rows(spark, f"{root}/{scratch_db}.gone").count() == 0
    assert_delta_equals_source(spark, root, mariadb_admin_params, scratch_db, ["t"])
