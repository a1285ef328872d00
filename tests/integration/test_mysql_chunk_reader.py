"""Chunk boundaries and ranges are computed by MariaDB: composite keys as row values,
strings in the column's collation; chunks partition the table exactly; filters bind
their literals."""

from __future__ import annotations

import threading
import time

import pytest

from cdc_core.connectors.mysql.chunk_reader import MySqlChunkSource
from cdc_core.connectors.mysql.ddl import parse_create_table
from cdc_core.signals.conditions import parse_condition
from cdc_core.snapshot.chunks import ChunkPlan, SnapshotError, snapshot_key
from tests.support.streamer import admin

pytestmark = pytest.mark.integration


@pytest.fixture
def table(mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (region VARCHAR(10) COLLATE utf8mb4_general_ci, n INT, note VARCHAR(20), "
            "PRIMARY KEY (region, n))"
        )
        rows = [(r, n, f"{r}-{n}") for r in ("b", "A", "c", "a2", "B2") for n in range(1, 8)]
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)
        cur.execute("SHOW CREATE TABLE t")
        schema = parse_create_table(cur.fetchone()[1], scratch_db)
        cur.execute("SELECT region, n FROM t ORDER BY region, n")
        server_order = [tuple(r) for r in cur.fetchall()]
    return schema, server_order


def reader(mariadb_params):
    params = {k: v for k, v in mariadb_params.items() if k in ("host", "port", "user", "password")}
    return MySqlChunkSource(params, "tidemark.debezium_signal")


def test_chunks_partition_the_table_in_the_servers_order(mariadb_params, table):
    schema, server_order = table
    plan = ChunkPlan(schema, snapshot_key(schema, None))
    source = reader(mariadb_params)
    try:
        assert not source.exact_key_order(plan)  # a case-insensitive string leads the key
        lo, seen, sizes = None, [], []
        while True:
            hi = source.next_boundary(plan, lo, 6)
            rows = source.read_chunk(plan, lo, hi)
            sizes.append(len(rows))
            seen.extend((r[0], r[1]) for r in rows)
            if hi is None:
                break
            assert (rows[-1][0], rows[-1][1]) == hi
            lo = hi
        assert seen == server_order  # 'A' < 'a2' < 'b' < 'B2' < 'c' under general_ci
        assert sizes == [6, 6, 6, 6, 6, 5]
        assert source.boundaries(plan, 6) == [server_order[i] for i in range(5, 35, 6)]
        by_note = ChunkPlan(schema, ("note",))  # not the primary key: the ROW_NUMBER() pass
        with source.conn.cursor() as cur:
            cur.execute(f"SELECT note FROM {schema.id.database}.t ORDER BY note")
            notes = [tuple(r) for r in cur.fetchall()]
        assert source.boundaries(by_note, 6) == [notes[i] for i in range(5, 35, 6)]
    finally:
        source.close()


def test_filters_are_bound_and_the_surrogate_key_must_exist(mariadb_params, table):
    schema, _ = table
    condition = parse_condition("note LIKE 'b%' AND n BETWEEN 2 AND 3", schema.column_names)
    plan = ChunkPlan(schema, ("region", "n"), condition)
    hostile = parse_condition("note = 'x'' OR ''1''=''1'", schema.column_names)
    source = reader(mariadb_params)
    try:
        assert [(r[0], r[1]) for r in source.read_chunk(plan, None, None)] == [
            ("b", 2), ("b", 3), ("B2", 2), ("B2", 3)
        ]  # fmt: skip
        assert source.read_chunk(ChunkPlan(schema, ("region", "n"), hostile), None, None) == []
    finally:
        source.close()
    with pytest.raises(SnapshotError, match="surrogate-key 'nope' is not a column"):
        snapshot_key(schema, "nope")


def test_watermarks_are_rows_in_the_signal_table(mariadb_params, mariadb_admin_params):
    source = reader(mariadb_params)
    try:
        source.write_watermark("snapshot-window-open", "test-wm-1", {"window": "w1"})
    finally:
        source.close()
    db = admin(mariadb_admin_params)
    with db.cursor() as cur:
        cur.execute("SELECT type, data FROM tidemark.debezium_signal WHERE id = 'test-wm-1'")
        assert cur.fetchone() == ("snapshot-window-open", '{"window":"w1"}')
        cur.execute("DELETE FROM tidemark.debezium_signal WHERE id = 'test-wm-1'")


def test_a_read_only_chunk_is_read_once_the_database_shows_what_the_streamer_passed(
    mariadb_params, mariadb_admin_params, table
):
    """MariaDB hands a transaction to the binlog (and the streamer) before other sessions
    see it, so a read-only chunk waits until a consistent snapshot starts at or after the
    position the window opened at. A position in the next binlog file stands for one the
    database does not show yet: the read waits for the rotation, and sees what was
    committed before it."""
    schema, server_order = table
    plan = ChunkPlan(schema, snapshot_key(schema, None))
    source = reader(mariadb_params)
    db = admin(mariadb_admin_params, schema.id.database)
    try:
        with db.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        assert len(source.read_chunk_seeing(plan, None, None, {"file": file, "pos": pos})) == len(
            server_order
        )
        assert len(source.read_chunk_seeing(plan, None, None, None)) == len(server_order)

        stem, index = file.rsplit(".", 1)
        ahead = {"file": f"{stem}.{int(index) + 1:0{len(index)}d}", "pos": 4}
        read: dict[str, list] = {}
        waiting = threading.Thread(
            target=lambda: read.update(rows=source.read_chunk_seeing(plan, None, None, ahead))
        )
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive() and not read
        with db.cursor() as cur:
            cur.execute("INSERT INTO t VALUES ('z', 1, 'late')")
            cur.execute("FLUSH BINARY LOGS")
        waiting.join(10)
        assert ("z", 1) in {(r[0], r[1]) for r in read["rows"]}
    finally:
        db.close()
        source.close()
