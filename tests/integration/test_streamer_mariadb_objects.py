"""MariaDB objects that are not plain tables, against the real MariaDB: system-versioned
tables (refused by name), tables that foreign keys change below the binlog (named), and
sequences, whose state MariaDB logs as row events of a table of their own (passed by)."""

from __future__ import annotations

import logging

import pytest

from tests.support.streamer import (
    admin,
    payloads,
    run_to_exit,
    running_in_process,
    stopped_by,
    topic,
    wait_for,
    write_connector,
)

pytestmark = pytest.mark.integration


def test_system_versioned_tables_are_refused_by_name_at_start_and_mid_stream_and_can_be_left_out(
    tmp_path, mariadb_admin_params, scratch_db
):
    """A MariaDB system-versioned table's binlog rows mix history versions with the
    current row under one key (an UPDATE writes the old version as a new row; a DELETE
    updates its end). Such a table was missing from the first schema history (its type is
    not BASE TABLE), which stopped the streamer saying to reset its state, which could not
    help; one created mid-stream with explicit period columns would have landed history as
    current rows. Now both say what the table is and how to leave it out."""
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE plain (id INT PRIMARY KEY, a INT)")
        cur.execute("CREATE TABLE hist (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING")
    c = write_connector(tmp_path / "a", scratch_db, {"database.server.id": 6314})
    refused = run_to_exit(c, timeout=60)
    assert refused.returncode != 0
    assert f"{scratch_db}.hist: MariaDB system-versioned tables" in refused.stdout + refused.stderr
    assert "table.exclude.list" in refused.stdout + refused.stderr

    excluded = {"database.server.id": 6314, "table.exclude.list": rf"{scratch_db}\.hist.*"}
    c = write_connector(tmp_path / "b", scratch_db, excluded)
    said = stopped_by(
        c,
        db,
        "INSERT INTO hist VALUES (1, 1)",
        "UPDATE hist SET a = 2",
        "INSERT INTO plain VALUES (1, 1)",
        "CREATE TABLE hist2 (id INT PRIMARY KEY, a INT, s TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
        "e TIMESTAMP(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) WITH SYSTEM VERSIONING",
        "CREATE TABLE later (id INT PRIMARY KEY, a INT)",
        "ALTER TABLE later ADD SYSTEM VERSIONING",
    )
    assert f"{scratch_db}.later: MariaDB system-versioned tables" in said and "(DDL at " in said
    # Left out as well, it is passed by; nothing before it was lost.
    excluded["table.exclude.list"] = rf"{scratch_db}\.(hist|later).*"
    c = write_connector(tmp_path / "b", scratch_db, excluded)
    with running_in_process(c):
        wait_for(lambda: payloads(c, topic(c, scratch_db, "plain")), 60, message="the insert")
    assert [p["after"] for p in payloads(c, topic(c, scratch_db, "plain"))] == [{"id": 1, "a": 1}]
    assert not any(payloads(c, topic(c, scratch_db, t)) for t in ("hist", "hist2", "later"))


def test_a_captured_table_that_foreign_keys_change_is_named_at_first_start_and_at_its_ddl(
    tmp_path, mariadb_admin_params, scratch_db, caplog
):
    """InnoDB applies ON DELETE/UPDATE CASCADE and SET NULL below the binlog, which holds
    only the parent's change: the child's copies downstream keep rows the source no longer
    has, without a word. The streamer cannot see those changes; it says so, per captured
    table, when it first reads the table's definition and at a DDL that adds such a key."""
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE parent (id INT PRIMARY KEY)")
        cur.execute(
            "CREATE TABLE child (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_parent FOREIGN KEY (pid) "
            "REFERENCES parent (id) ON DELETE CASCADE ON UPDATE SET NULL)"
        )
        cur.execute(
            "CREATE TABLE other (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent (id))"
        )
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6315})
    with caplog.at_level(logging.WARNING, "tidemark.mysql"), running_in_process(c):
        with db.cursor() as cur:
            cur.execute("INSERT INTO parent VALUES (1)")
            cur.execute("INSERT INTO child VALUES (10, 1)")
            cur.execute("DELETE FROM parent WHERE id = 1")  # deletes child 10 below the binlog
            cur.execute("ALTER TABLE other ADD FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE SET NULL")
        wait_for(lambda: "other" in caplog.text, 60, message="the DDL's warning")
        wait_for(
            lambda: len(payloads(c, topic(c, scratch_db, "parent"))) == 2, 60, message="the parent's events"
        )
    assert [p["op"] for p in payloads(c, topic(c, scratch_db, "child"))] == ["c"]
    warned = [r.getMessage() for r in caplog.records if "foreign keys" in r.getMessage()]
    assert len(warned) == 2
    assert warned[0].startswith(
        f"{scratch_db}.child: its foreign keys change its rows below the binlog (ON DELETE"
    )
    assert "(ON DELETE CASCADE ON UPDATE SET NULL)" in warned[0]
    assert warned[1].startswith(
        f"{scratch_db}.other: its foreign keys change its rows below the binlog (ON DELETE"
    )
    assert "(ON DELETE SET NULL)" in warned[1]


def test_sequences_are_passed_by_and_the_tables_that_draw_on_them_streamed(
    tmp_path, mariadb_admin_params, scratch_db, caplog
):
    """MariaDB logs a sequence's state as row events of a table of its own at NEXTVAL (when
    it passes the cache), SETVAL and ALTER SEQUENCE. A sequence is no table of the history
    (CREATE SEQUENCE is not a table's DDL), so its first NEXTVAL stopped the streamer,
    saying the history was incomplete and to reset the state, which could not help; and a
    RENAME TABLE of one (or of a view) stopped it on DDL it could not apply. They are now
    passed by, and the tables around them stream as before."""
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
        cur.execute("CREATE SEQUENCE s1")
        cur.execute("CREATE VIEW v AS SELECT id FROM t")
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6316})
    with caplog.at_level(logging.WARNING), running_in_process(c):
        with db.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (1, 1)")
            cur.execute("SELECT NEXTVAL(s1)")
            cur.execute("CREATE SEQUENCE s2 START WITH 100 INCREMENT BY 10")
            cur.execute("SELECT SETVAL(s2, 5000)")
            cur.execute("ALTER SEQUENCE s2 RESTART WITH 7")
            cur.execute("CREATE TABLE u (id INT PRIMARY KEY DEFAULT NEXTVAL(s2), a INT)")
            cur.execute("INSERT INTO u (a) VALUES (1), (2)")  # with the sequence's row, in one transaction
            cur.execute("RENAME TABLE s2 TO s3, v TO w")
            cur.execute("SELECT NEXTVAL(s3)")
            cur.execute(
                "CREATE TABLE s4 (next_not_cached_value bigint(21) NOT NULL, minimum_value bigint(21) NOT NULL, "
                "maximum_value bigint(21) NOT NULL, start_value bigint(21) NOT NULL, increment bigint(21) NOT "
                "NULL, cache_size bigint(21) unsigned NOT NULL, cycle_option tinyint(1) unsigned NOT NULL, "
                "cycle_count bigint(21) NOT NULL) SEQUENCE=1"
            )
            cur.execute("SELECT NEXTVAL(s4)")
            cur.execute("DROP SEQUENCE s1")
            cur.execute("DROP TABLE s3")
            cur.execute("INSERT INTO t VALUES (2, 2)")
        wait_for(lambda: len(payloads(c, topic(c, scratch_db, "t"))) == 2, 60, message="the last insert")
    assert [p["after"] for p in payloads(c, topic(c, scratch_db, "u"))] == [
        {"id": 7, "a": 1},
        {"id": 17, "a": 2},
    ]
    assert not any(payloads(c, topic(c, scratch_db, s)) for s in ("s1", "s2", "s3", "s4"))
    assert "ERROR" not in caplog.text


def test_partition_operations_that_move_rows_below_the_binlog_are_named_and_their_tables_followed(
    tmp_path, mariadb_admin_params, scratch_db, caplog
):
    """TRUNCATE, DROP, EXCHANGE and CONVERT PARTITION remove or move rows with no row
    events: the streamer passed by the first three without a word (the copies downstream
    kept the removed rows), and stopped at CONVERT PARTITION on DDL it could not read.
    Each is now named with a warning, and the table CONVERT PARTITION makes is followed."""
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute(
            "CREATE TABLE p (id INT PRIMARY KEY, a INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS "
            "THAN (10), PARTITION p1 VALUES LESS THAN (100), PARTITION p2 VALUES LESS THAN (1000))"
        )
        cur.execute("CREATE TABLE x (id INT PRIMARY KEY, a INT)")
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6317})
    with caplog.at_level(logging.WARNING, "tidemark.mysql"), running_in_process(c):
        with db.cursor() as cur:
            cur.execute("INSERT INTO p VALUES (1, 1), (50, 50), (500, 500)")
            cur.execute("INSERT INTO x VALUES (60, 60)")
            cur.execute("ALTER TABLE p TRUNCATE PARTITION p0")
            cur.execute("ALTER TABLE p EXCHANGE PARTITION p1 WITH TABLE x")
            cur.execute("ALTER TABLE p CONVERT PARTITION p2 TO TABLE q")
            cur.execute("INSERT INTO q VALUES (501, 501)")
            cur.execute("ALTER TABLE p DROP PARTITION p1")
        wait_for(lambda: payloads(c, topic(c, scratch_db, "q")), 60, message="the insert into the new table")
        # (the last statement comes after that insert: stopping at the insert could leave it unread)
        wait_for(lambda: "DROP PARTITION" in caplog.text, 60, message="the DROP PARTITION")
    assert [p["after"] for p in payloads(c, topic(c, scratch_db, "q"))] == [{"id": 501, "a": 501}]
    warned = [r.getMessage() for r in caplog.records if "with no row events" in r.getMessage()]
    assert [w.split(" at ")[0] for w in warned] == [
        f"{scratch_db}.p: TRUNCATE PARTITION",
        f"{scratch_db}.p, {scratch_db}.x: EXCHANGE PARTITION",
        f"{scratch_db}.p, {scratch_db}.q: CONVERT PARTITION",
        f"{scratch_db}.p: DROP PARTITION",
    ]
