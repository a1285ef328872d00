"""GTID sets and the epoch/rank derived from them (README: ordered transaction metadata)."""

from __future__ import annotations

import pytest

from cdc_core.connectors.mysql.positions import MariaDbGtidState, MySqlGtidSet, binlog_file_index


def test_mariadb_rank_grows_with_every_transaction_in_any_domain():
    s = MariaDbGtidState.parse("0-1-100,1-2-7")
    assert s.rank() == 107
    t = s.with_gtid("1-2-8")
    u = t.with_gtid("0-3-101")  # failover: another server continues domain 0
    assert (s.rank(), t.rank(), u.rank()) == (107, 108, 109)
    assert t.succeeds(s) and u.succeeds(t)
    assert str(u) == "0-3-101,1-2-8"


def test_mariadb_reset_is_not_a_successor():
    s = MariaDbGtidState.parse("0-1-100")
    assert not s.with_gtid("0-1-1").succeeds(s)


def test_mysql_gtid_set_round_trip_and_rank():
    text = "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7,aaaaaaaa-0000-0000-0000-000000000000:1-3"
    g = MySqlGtidSet.parse(text)
    assert str(g) == text.lower()
    assert g.rank() == 7 + 3
    h = g.with_gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
    assert str(h).startswith("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7,")
    assert h.succeeds(g)


@pytest.mark.parametrize(("name", "index"), [("mariadb-bin.000042", 42), ("binlog.1000000", 1000000)])
def test_binlog_file_index(name, index):
    assert binlog_file_index(name) == index


def test_a_table_id_holds_a_schema_part_and_names_its_topic_as_debezium_does():
    from cdc_core.schema.model import TableId, TableSchema

    mysql, oracle = TableId("shop", "orders"), TableId("ORCLPDB1", "CUSTOMERS", "INVENTORY")
    assert (str(mysql), mysql.topic_suffix()) == ("shop.orders", "shop.orders")
    assert (str(oracle), oracle.topic_suffix()) == ("ORCLPDB1.INVENTORY.CUSTOMERS", "INVENTORY.CUSTOMERS")
    assert TableId.parse("ORCLPDB1.INVENTORY.CUSTOMERS", parts=3) == oracle
    assert TableId.parse("shop.my.table") == TableId("shop", "my.table")  # a dot in a MySQL table name
    schema = TableSchema(oracle, ())
    assert TableSchema.from_json(schema.to_json()).id == oracle
    assert "schema" not in TableSchema(mysql, ()).to_json()  # histories written before read alike
