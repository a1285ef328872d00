"""The tables a statement-logged data change writes (binlog_format=STATEMENT or MIXED in
a session): what the streamer names when it cannot emit that change's rows."""

from __future__ import annotations

import pytest

from cdc_core.connectors.mysql.statement_dml import dml_tables, is_dml
from cdc_core.schema.model import TableId


@pytest.mark.parametrize(
    "query, tables",
    [
        ("INSERT INTO stmt VALUES (2, 2)", {"db.stmt"}),
        ("insert low_priority ignore into `s`.`t` (a) select * from x", {"s.t"}),
        ("/* app */ REPLACE t2 SET a = 1", {"db.t2"}),
        ("UPDATE stmt SET a = 5", {"db.stmt"}),
        (
            "UPDATE orders o JOIN shop.lines l ON o.id = l.oid SET o.n = 1",
            {"db.orders", "db.o", "shop.lines", "db.l", "o.id", "l.oid"},
        ),
        ("DELETE FROM t WHERE id = 1", {"db.t"}),
        ("DELETE t1, t2 FROM t1 INNER JOIN t2 USING (id) WHERE 1", {"db.t1", "db.t2"}),
        ("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE shop.orders", {"shop.orders"}),
    ],
)
def test_a_data_change_names_the_tables_it_writes(query, tables):
    assert is_dml(query)
    assert {str(t) for t in dml_tables(query, "db")} == tables


@pytest.mark.parametrize(
    "query",
    ["BEGIN", "ALTER TABLE t ADD c INT", "LOAD INDEX INTO CACHE t", "CREATE TABLE insert_log (id INT)"],
)
def test_other_statements_are_not_data_changes(query):
    assert not is_dml(query)


def test_an_unqualified_table_without_a_default_database_names_nothing():
    assert dml_tables("INSERT INTO t VALUES (1)", None) == set()
    assert dml_tables("INSERT INTO s.t VALUES (1)", None) == {TableId("s", "t")}
