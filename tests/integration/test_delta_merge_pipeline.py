"""MariaDB -> streamer -> event log (embedded or Kafka) -> merge -> Delta equals the source."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
import uuid
from contextlib import ExitStack

import pytest

from tests.support.kafka import end_offset
from tests.support.streamer import (
    admin,
    cut_at_end,
    kafka_connector,
    payloads,
    read_raw,
    running_in_process,
    wait_for,
    write_connector,
)

pytestmark = pytest.mark.integration

DDL = [
    "CREATE TABLE accounts (id INT PRIMARY KEY, name VARCHAR(20), balance DECIMAL(12,2), opened DATE, "
    "seen DATETIME(6), score DOUBLE)",
    "CREATE TABLE pairs (a INT, b VARCHAR(8), v INT, PRIMARY KEY (a, b))",
]


def write_changes(db) -> None:
    with db.cursor() as cur:
        for i in range(1, 21):
            cur.execute(
                "INSERT INTO accounts VALUES (%s, %s, %s, '2024-02-29', '2024-02-29 23:59:59.123456', %s)",
                (i, f"n{i}", decimal.Decimal(i) / 4, i * 1.5),
            )
        cur.execute("INSERT INTO pairs VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3)")
        db.begin()
        cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id <= 5")
        cur.execute("DELETE FROM accounts WHERE id IN (6, 7)")
        cur.execute("UPDATE pairs SET v = v * 10 WHERE a = 1")
        db.commit()
        cur.execute("UPDATE accounts SET id = 100 WHERE id = 8")  # a key change: delete + create
        cur.execute("DELETE FROM pairs WHERE a = 2")
        cur.execute("INSERT INTO accounts VALUES (6, 'back', 0, NULL, NULL, NULL)")  # a deleted key again


def source_rows(db, table: str) -> list[tuple]:
    with db.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY 1, 2")
        return [tuple(r) for r in cur.fetchall()]


def delta_rows(spark, root, database: str, table: str) -> list[tuple]:
    from spark_jobs.merge.delta_apply import live_rows

    frame = live_rows(spark, f"{root}/{database}.{table}")
    return sorted((tuple(r) for r in frame.collect()), key=lambda r: (r[0], r[1]))


def assert_equal(spark, db, root, database):
    assert delta_rows(spark, root, database, "accounts") == source_rows(db, "accounts")
    assert delta_rows(spark, root, database, "pairs") == source_rows(db, "pairs")


def total_events(c, database) -> int:
    return sum(len(payloads(c, f"{c.prefix}.{database}.{t}")) for t in ("accounts", "pairs"))


# The embedded log's three forms of the same events: JSON with the Connect schema, schemaless
# JSON naming it by reference, and Parquet (its typed files read without parsing JSON).
FORMATS = {
    "json": {"sink.local.format": "json"},
    "schemaless": {
        "sink.local.format": "json",
        "value.converter.schemas.enable": False,
        "key.converter.schemas.enable": False,
    },
    "parquet": {"sink.local.format": "parquet"},
}


def stored_rows(spark, root, database: str, table: str) -> list[tuple]:
    """Every row of the Delta table, bookkeeping and tombstones included."""
    frame = spark.read.format("delta").load(f"{root}/{database}.{table}")
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_embedded_log_to_delta_equals_the_source_in_each_format_and_a_replay_changes_nothing(
    spark, tmp_path, mariadb_admin_params, scratch_db
):
    """Three streamers capture the same changes, one per format of the embedded log; each
    log merged lands the source's rows, and the three Delta tables are the same, row for
    row with their order keys and tombstones."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.local_log_source import read_local_log

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for ddl in DDL:
            cur.execute(ddl)
    connectors = {
        name: write_connector(tmp_path / name, scratch_db, {**extra, "database.server.id": 6100 + n})
        for n, (name, extra) in enumerate(FORMATS.items())
    }
    with ExitStack() as running:
        for c in connectors.values():
            running.enter_context(running_in_process(c))
        write_changes(db)
        for c in connectors.values():
            wait_for(lambda c=c: total_events(c, scratch_db) >= 36, 60, message="events in the log")
    c = connectors["parquet"]  # its events and their BEGIN/END are read typed, not parsed
    topics = [
        f"{c.prefix}.{scratch_db}.accounts",
        f"{c.prefix}.{scratch_db}.pairs",
        f"{c.prefix}.transaction",
    ]
    assert sorted({p.topic for p in read_local_log(spark, c.eventlog, topics)[1]}) == sorted(topics)
    stored = {}
    for name, c in connectors.items():
        root, checkpoint = str(tmp_path / name / "delta"), str(tmp_path / name / "checkpoint")
        assert run_local(spark, c.config(), root, checkpoint) == 2, name
        assert_equal(spark, db, root, scratch_db)
        stored[name] = [stored_rows(spark, root, scratch_db, t) for t in ("accounts", "pairs")]
    assert stored["schemaless"] == stored["json"]
    assert stored["parquet"] == stored["json"]
    first = delta_rows(spark, root, scratch_db, "accounts")
    assert first[0][3] == dt.date(2024, 2, 29) and first[0][4] == dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    assert run_local(spark, c.config(), root, checkpoint) == 0  # nothing new
    shutil.rmtree(checkpoint)  # replay the whole log
    assert run_local(spark, c.config(), root, checkpoint) == 2
    assert_equal(spark, db, root, scratch_db)


def test_kafka_to_delta_with_an_available_now_stream_and_a_crash_before_its_checkpoint(
    spark, tmp_path, mariadb_admin_params, scratch_db, kafka_bootstrap, monkeypatch
):
    from delta.tables import DeltaTable

    from spark_jobs.delta_merge import run_kafka
    from tests.support.kafka import read_topic

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for ddl in DDL:
            cur.execute(ddl)
    c = kafka_connector(tmp_path, scratch_db, kafka_bootstrap, "merge")
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")

    def events() -> int:
        return sum(
            1
            for t in ("accounts", "pairs")
            for _, v in read_topic(kafka_bootstrap, f"{c.prefix}.{scratch_db}.{t}")
            if v
        )

    with running_in_process(c):
        write_changes(db)
        wait_for(lambda: events() >= 36, 60, message="events in Kafka")
    run_kafka(spark, c.config(), root, checkpoint, "available-now")
    assert_equal(spark, db, root, scratch_db)
    # Each commit records the offsets its batch reached: the topic's last one.
    for table in ("accounts", "pairs"):
        topic = f"{c.prefix}.{scratch_db}.{table}"
        commit = DeltaTable.forPath(spark, f"{root}/{scratch_db}.{table}").history(1).collect()[0]
        reached = json.loads(commit.userMetadata)["tidemark"]["reached"]
        assert reached == {"0": end_offset(kafka_bootstrap, topic) - 1}
    with db.cursor() as cur:  # more changes: the next run starts from the checkpoint
        cur.execute("UPDATE pairs SET v = -1")
    with running_in_process(c):
        wait_for(lambda: events() >= 38, 60, message="the later events in Kafka")
    # A crash after the MERGE committed but before the stream's checkpoint did: the
    # restarted stream runs the same batch again, and it changes nothing more.
    from spark_jobs.merge.transactions import PendingStore

    def crash(self, batch_id, held):
        raise RuntimeError("killed between the MERGE and the checkpoint commit")

    monkeypatch.setattr(PendingStore, "write", crash)
    with pytest.raises(Exception, match="killed between the MERGE"):
        run_kafka(spark, c.config(), root, checkpoint, "available-now")
    monkeypatch.undo()
    pairs = f"{root}/{scratch_db}.pairs"
    assert delta_rows(spark, root, scratch_db, "pairs") == source_rows(db, "pairs")  # merged before the crash
    versions = DeltaTable.forPath(spark, pairs).history().count()
    run_kafka(spark, c.config(), root, checkpoint, "available-now")
    assert_equal(spark, db, root, scratch_db)
    later = DeltaTable.forPath(spark, pairs).history().where(f"version >= {versions}").collect()
    changed = [
        m.operationMetrics.get(k, "0")
        for m in later
        for k in ("numTargetRowsUpdated", "numTargetRowsInserted", "numTargetRowsDeleted")
    ]
    assert set(changed) <= {"0"}  # the batch ran again to no effect


def test_a_kafka_batch_ending_inside_a_transaction_holds_its_records_as_the_broker_has_them(
    spark, tmp_path, kafka_bootstrap
):
    """The parse keeps no payload of a record Kafka can give again: the records of a
    transaction the batch ends inside are read back from the broker, at their offsets and
    only those, and held whole for the next batch."""
    from confluent_kafka import Producer

    from spark_jobs.delta_merge import apply_aligned
    from spark_jobs.merge.delta_apply import live_rows
    from spark_jobs.merge.kafka_source import kafka_ranges, kafka_records
    from spark_jobs.merge.transactions import PendingStore
    from tests.support.events import event, row, transaction

    prefix = f"held{uuid.uuid4().hex[:8]}"
    records = [
        transaction("BEGIN", 1),
        event("c", (0, 1, 1), after=row(1, "a")),
        transaction("END", 1, {"shop.accounts": 1}),
        transaction("BEGIN", 2),
        event("c", (0, 2, 1), after=row(2, "b")),
        event("u", (0, 2, 2), before=row(1, "a"), after=row(1, "a2")),  # its END comes later
    ]
    for r in records:
        r["topic"] = r["topic"].replace("tm.", f"{prefix}.", 1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for r in records:
        producer.produce(r["topic"], key=r["key"], value=r["value"])
    assert producer.flush(30) == 0
    topics = f"{prefix}.shop.accounts,{prefix}.transaction"
    batch = kafka_records(spark.read, kafka_bootstrap, 2, subscribe=topics, startingOffsets="earliest")
    asked = []

    def reread(ranges):
        asked.append(ranges)
        return kafka_ranges(spark, kafka_bootstrap, 2, ranges)

    pending = PendingStore(spark, str(tmp_path / "held"))
    apply_aligned(spark, batch, str(tmp_path), prefix, None, pending, 1, reread=reread)
    table = f"{tmp_path}/shop.accounts"
    assert sorted((r.id, r.name) for r in live_rows(spark, table).collect()) == [(1, "a")]
    assert asked == [{(f"{prefix}.shop.accounts", 0): (1, 2)}]  # the two events, not the batch
    held = sorted((r.topic, r.key, r.value) for r in pending.read(2).collect())
    assert held == sorted((r["topic"], r["key"], r["value"]) for r in records[3:])


def test_schemaless_values_from_kafka_land_with_their_schemas_by_reference(
    spark, tmp_path, mariadb_admin_params, scratch_db, kafka_bootstrap
):
    """`value.converter.schemas.enable: false`: each value names its schema, written once
    to a compacted `<prefix>.schemas`; the merge types the payloads exactly from it."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from spark_jobs.delta_merge import run_kafka
    from tests.support.kafka import read_topic

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for ddl in DDL:
            cur.execute(ddl)
    schemaless = {"value.converter.schemas.enable": False, "key.converter.schemas.enable": False}
    c = kafka_connector(tmp_path, scratch_db, kafka_bootstrap, "refs", schemaless)
    accounts = f"{c.prefix}.{scratch_db}.accounts"
    with running_in_process(c):
        write_changes(db)
        wait_for(
            lambda: len([v for _, v in read_topic(kafka_bootstrap, accounts) if v]) >= 30,
            60,
            message="events",
        )
    first = next(v for _, v in read_topic(kafka_bootstrap, accounts) if v)
    assert "schema" not in first and first["after"]["id"] == 1  # the payload alone
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"{c.prefix}.schemas")
    kafka_admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    described = kafka_admin.describe_configs([resource])[resource].result(30)
    assert described["cleanup.policy"].value == "compact"  # one record per schema outlives retention
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    run_kafka(spark, c.config(), root, checkpoint, "available-now")
    assert_equal(spark, db, root, scratch_db)
    stored = delta_rows(spark, root, scratch_db, "accounts")[0]
    assert stored[2] == decimal.Decimal("1.25") and stored[3] == dt.date(2024, 2, 29)


def test_a_kafka_batch_of_one_topic_partition_is_read_in_several_tasks_and_whole(
    spark, tmp_path, kafka_bootstrap
):
    """A batch of one busy table is parsed on every core: its offsets are split between
    tasks, and every record is read exactly once."""
    from confluent_kafka import Producer

    from spark_jobs.merge.kafka_source import kafka_records

    topic = f"tidemark-split-{uuid.uuid4().hex}"  # a broker kept between runs has the old ones
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(300):
        producer.produce(topic, key=str(n).encode(), value=json.dumps({"n": n}).encode())
    assert producer.flush(30) == 0
    records = kafka_records(spark.read, kafka_bootstrap, 3, subscribe=topic, startingOffsets="earliest")
    assert records.rdd.getNumPartitions() == 3
    rows = records.collect()
    assert sorted(r.offset for r in rows) == list(range(300))
    assert sorted(int(r.key) for r in rows) == list(range(300))
    assert {r.partition for r in rows} == {0}


def test_a_truncate_ends_the_rows_before_it_whatever_the_batches_for_latest_and_scd2_tables(
    spark, tmp_path, mariadb_admin_params, scratch_db
):
    """With truncates emitted (`skipped.operations: none`), the merge ends every row older
    than a TRUNCATE. The latest-row table `t` holds the source's rows; the SCD2 table `h`
    (the same changes but a delete) closes each current version with a delete version at
    the truncate. The Parquet log is merged batch by batch (one batch holds `h`'s truncate
    alone, so no key), the JSON log in one batch holding both truncates: both land the
    same rows, bookkeeping included, and a replay changes nothing."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.merge.options import MergeOptions

    db = admin(mariadb_admin_params, scratch_db)
    tables = ("t", "h")
    with db.cursor() as cur:
        for table in tables:
            cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")
    connectors = {
        name: write_connector(
            tmp_path / name,
            scratch_db,
            {**FORMATS[name], "database.server.id": 6150 + n, "skipped.operations": "none"},
        )
        for n, name in enumerate(("json", "parquet"))
    }
    options = MergeOptions(scd2=rf"{scratch_db}\.h")

    def merge(name: str) -> None:
        base = tmp_path / name
        run_local(spark, connectors[name].config(), str(base / "delta"), str(base / "checkpoint"), options)

    def run(steps: list[tuple[str, tuple[str, ...]]], events: int) -> None:
        with db.cursor() as cur:
            for statement, names in steps:
                for table in names:
                    cur.execute(statement.format(table))
        for name, c in connectors.items():
            wait_for(lambda c=c: len(read_raw(c, f"{c.prefix}.{scratch_db}.h")) >= events, 60, message=name)
            wait_for(lambda c=c: cut_at_end(c), 60, message=f"{name}: the log's cut at its end")

    def current(name: str, table: str) -> list[tuple]:
        return delta_rows(spark, str(tmp_path / name / "delta"), scratch_db, table)

    with ExitStack() as running:
        for c in connectors.values():
            running.enter_context(running_in_process(c))
        run(
            [
                ("INSERT INTO {} VALUES (1, 1), (2, 2), (3, 3)", tables),
                ("UPDATE {} SET v = 20 WHERE id = 2", tables),
            ],
            4,
        )
        merge("parquet")
        assert current("parquet", "t") == current("parquet", "h") == [(1, 1), (2, 20), (3, 3)]
        run([("DELETE FROM {} WHERE id = 3", ("t",)), ("TRUNCATE TABLE {}", tables)], 5)
        merge("parquet")
        assert [current("parquet", table) for table in tables] == [[]] * 2
        later = [("INSERT INTO {} VALUES (4, 4)", tables), ("TRUNCATE TABLE {}", tables)]
        run([*later, ("INSERT INTO {} VALUES (5, 5), (1, 9)", tables)], 9)
        merge("parquet")
        merge("json")
    stored = {}
    for name in connectors:
        for table in tables:
            assert current(name, table) == source_rows(db, table) == [(1, 9), (5, 5)], (name, table)
        stored[name] = [stored_rows(spark, str(tmp_path / name / "delta"), scratch_db, t) for t in tables]
    assert stored["json"] == stored["parquet"]
    latest = spark.read.format("delta").load(str(tmp_path / "parquet" / "delta" / f"{scratch_db}.t"))
    ops = sorted((r.id, r._cdc_op) for r in latest.collect())
    assert ops == [(1, "c"), (2, "t"), (3, "d"), (4, "t"), (5, "c")]  # 3: deleted before, not ended again
    history = spark.read.format("delta").load(str(tmp_path / "parquet" / "delta" / f"{scratch_db}.h"))
    versions = sorted(
        (r.id, r.v, r._cdc_op, r._cdc_deleted, r._cdc_current, r._cdc_end_rank is None)
        for r in history.collect()
    )
    assert versions == [
        (1, 1, "c", False, False, False),
        (1, 1, "t", True, False, False),  # ended by the first truncate, inserted again later
        (1, 9, "c", False, True, True),
        (2, 2, "c", False, False, False),
        (2, 20, "t", True, False, True),
        (2, 20, "u", False, False, False),
        (3, 3, "c", False, False, False),
        (3, 3, "t", True, False, True),
        (4, 4, "c", False, False, False),
        (4, 4, "t", True, False, True),
        (5, 5, "c", False, True, True),
    ]
    shutil.rmtree(tmp_path / "parquet" / "checkpoint")  # replay the whole log: both truncates in one batch
    merge("parquet")
    assert [stored_rows(spark, str(tmp_path / "parquet" / "delta"), scratch_db, t) for t in tables] == stored[
        "parquet"
    ]
