"""python-mysql-replication reads MariaDB's row events, with column names, through the
CDC user (REPLICATION SLAVE/CLIENT + SELECT) from the project's MariaDB."""

from __future__ import annotations

import pymysql
import pytest

pytestmark = pytest.mark.integration


def test_insert_update_delete_row_events_with_column_names(mariadb_params, mariadb_admin_params, scratch_db):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    admin = pymysql.connect(**mariadb_admin_params, autocommit=True)
    with admin.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{scratch_db}`.customers "
            "(id INT PRIMARY KEY, name VARCHAR(40) CHARACTER SET utf8mb4, email VARCHAR(80))"
        )
        # MariaDB streams from a GTID position (the library ignores file/pos for MariaDB).
        cur.execute("SELECT @@gtid_binlog_pos")
        (start_gtid,) = cur.fetchone()
        cur.execute(f"INSERT INTO `{scratch_db}`.customers VALUES (1, 'Zoë', 'z@example.com')")
        cur.execute(f"UPDATE `{scratch_db}`.customers SET email = 'zoe@example.com' WHERE id = 1")
        cur.execute(f"DELETE FROM `{scratch_db}`.customers WHERE id = 1")
    admin.close()

    stream = BinLogStreamReader(
        connection_settings=mariadb_params,
        server_id=9001,
        auto_position=start_gtid,
        blocking=False,
        only_schemas=[scratch_db],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        is_mariadb=True,
    )
    try:
        events = [(type(e).__name__, e.table, e.rows) for e in stream]
    finally:
        stream.close()

    assert [(kind, table) for kind, table, _ in events] == [
        ("WriteRowsEvent", "customers"),
        ("UpdateRowsEvent", "customers"),
        ("DeleteRowsEvent", "customers"),
    ]
    inserted = {"id": 1, "name": "Zoë", "email": "z@example.com"}
    updated = {**inserted, "email": "zoe@example.com"}
    (write,), (update,), (delete,) = (rows for _, _, rows in events)
    assert write["values"] == inserted
    assert (update["before_values"], update["after_values"]) == (inserted, updated)
    assert delete["values"] == updated
