"""The snapshot properties at config load: `snapshot.mode` takes what each source can
honour and refuses Debezium's other modes with the reason; the watermarking strategy;
`snapshot.select.statement.overrides` in Debezium's form, its filters in the restricted
grammar (a condition, or `SELECT * FROM <table> WHERE <condition>` and nothing more),
checked against the table's columns once they are known."""

from __future__ import annotations

import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.config.snapshot_properties import override_condition, select_overrides
from cdc_core.errors import ConfigError
from cdc_core.schema.model import Column, TableId, TableSchema

MYSQL = """
name: shop
connector.class: mysql
topic.prefix: shop
database.hostname: 127.0.0.1
database.user: tidemark
database.server.id: 5401
signal.data.collection: tidemark.debezium_signal
"""
MONGODB = """
name: shop
connector.class: mongodb
topic.prefix: shop
mongodb.connection.string: mongodb://127.0.0.1:27017/?replicaSet=rs0
signal.data.collection: shop.debezium_signal
"""
VITESS = """
name: shop
connector.class: vitess
topic.prefix: shop
database.hostname: 127.0.0.1
database.user: tidemark
vitess.keyspace: commerce
"""


def load(tmp_path, base, extra=""):
    path = tmp_path / "c.yaml"
    path.write_text(base + extra)
    return load_config(path, environ={})


@pytest.mark.parametrize("base", [MYSQL, MONGODB], ids=["mysql", "mongodb"])
def test_every_mode_of_a_source_with_incremental_snapshots_is_taken(tmp_path, base):
    for mode in ("no_data", "initial", "initial_only", "when_needed"):
        assert load(tmp_path, base, f"snapshot.mode: {mode}\n").get("snapshot.mode") == mode
    assert load(tmp_path, base).get("snapshot.mode") == "no_data"


def test_debeziums_other_modes_are_refused_with_the_reason(tmp_path):
    reasons = {
        "never": "deprecated name of no_data",
        "schema_only": "former name of no_data",
        "always": "does not snapshot at every start",
        "recovery": "schema history",
        "custom": "not offered",
    }
    for mode, reason in reasons.items():
        with pytest.raises(ConfigError, match=f"snapshot.mode: {mode} is not supported: .*{reason}"):
            load(tmp_path, MYSQL, f"snapshot.mode: {mode}\n")


def test_a_mode_that_snapshots_needs_watermarks_at_load(tmp_path):
    without = MYSQL.replace("signal.data.collection: tidemark.debezium_signal\n", "")
    for mode in ("initial", "initial_only", "when_needed"):
        with pytest.raises(
            ConfigError, match=f"snapshot.mode: {mode} .*needs watermarks.*signal.data.collection"
        ):
            load(tmp_path, without, f"snapshot.mode: {mode}\n")
    assert load(tmp_path, without, "snapshot.mode: when_needed\nread.only: true\n").get("read.only")
    assert load(tmp_path, without).get("snapshot.mode") == "no_data"


def test_vitess_takes_its_copy_phase_modes_and_refuses_a_schema_only_start(tmp_path):
    for mode in ("initial", "never", "initial_only", "when_needed"):
        assert load(tmp_path, VITESS, f"snapshot.mode: {mode}\n").get("snapshot.mode") == mode
    with pytest.raises(ConfigError, match="snapshot.mode: no_data is not supported: Vitess reads no schema"):
        load(tmp_path, VITESS, "snapshot.mode: no_data\n")
    with pytest.raises(ConfigError, match="snapshot.mode: always is not supported"):
        load(tmp_path, VITESS, "snapshot.mode: always\n")


def test_the_watermarking_strategy(tmp_path):
    assert load(tmp_path, MYSQL).get("incremental.snapshot.watermarking.strategy") == "insert_insert"
    key = "incremental.snapshot.watermarking.strategy"
    assert load(tmp_path, MONGODB, f"{key}: insert_delete\n").get(key) == "insert_delete"
    with pytest.raises(ConfigError, match=f"{key}: expected one of insert_insert, insert_delete"):
        load(tmp_path, MYSQL, f"{key}: delete\n")


OVERRIDES = "snapshot.select.statement.overrides"


def test_overrides_in_debeziums_form(tmp_path):
    config = load(
        tmp_path,
        MYSQL,
        f"{OVERRIDES}: shop.orders,shop.items\n"
        f"{OVERRIDES}.shop.orders: \"status = 'paid' AND total > 10\"\n"
        f"{OVERRIDES}.shop.items: SELECT * FROM `shop`.`items` WHERE deleted IS NULL\n",
    )
    orders = TableSchema(
        TableId("shop", "orders"),
        (Column("id", "INT"), Column("status", "VARCHAR"), Column("total", "INT")),
        ("id",),
    )
    items = TableSchema(
        TableId("shop", "items"), (Column("id", "INT"), Column("deleted", "DATETIME")), ("id",)
    )
    tables = {orders.id: orders, items.id: items}
    found = select_overrides(config, tables, lambda t: True)
    assert found == {orders.id: "status = 'paid' AND total > 10", items.id: "deleted IS NULL"}


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            f"{OVERRIDES}: shop.orders\n",
            f"{OVERRIDES}: lists shop.orders but {OVERRIDES}.shop.orders .* is not set",
        ),
        (
            f"{OVERRIDES}.shop.orders: id > 1\n",
            f"{OVERRIDES}.shop.orders: shop.orders is not listed in {OVERRIDES}",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: id > 1; DELETE FROM orders\n",
            f"{OVERRIDES}.shop.orders: unexpected character ';'",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: SELECT id FROM shop.orders WHERE id > 1\n",
            "must be SELECT \\* FROM <table> WHERE <condition>",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: SELECT * FROM shop.orders o JOIN x WHERE id > 1\n",
            "must be SELECT",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: SELECT * FROM shop.users WHERE id > 1\n",
            "reads shop.users, not shop.orders",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: SELECT * FROM shop.orders WHERE id > 1 ORDER BY id\n",
            "unexpected 'ORDER'",
        ),
        (
            f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: sleep(5) = 0\n",
            "expected a comparison after column",
        ),
    ],
)
def test_overrides_that_are_not_well_formed_are_refused_at_load(tmp_path, extra, problem):
    with pytest.raises(ConfigError, match=problem):
        load(tmp_path, MYSQL, extra)


def test_overrides_are_checked_against_the_tables_columns_at_start(tmp_path):
    config = load(tmp_path, MYSQL, f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: colour = 'blue'\n")
    orders = TableSchema(
        TableId("shop", "orders"), (Column("id", "INT"), Column("status", "VARCHAR")), ("id",)
    )
    with pytest.raises(ConfigError, match=f"{OVERRIDES}.shop.orders: unknown column 'colour'"):
        select_overrides(config, {orders.id: orders}, lambda t: True)
    with pytest.raises(ConfigError, match="shop.orders is not a captured table"):
        select_overrides(config, {orders.id: orders}, lambda t: False)
    with pytest.raises(ConfigError, match="shop.orders is not a captured table"):
        select_overrides(config, {}, lambda t: True)


def test_a_select_names_its_table_with_or_without_the_database_and_quotes():
    assert override_condition("shop.orders", "select * from orders where id = 1") == "id = 1"
    assert override_condition("shop.orders", 'SELECT *\nFROM "shop"."orders"\nWHERE id = 1') == "id = 1"
    assert override_condition("shop.orders", "  id = 1 ") == "id = 1"
    with pytest.raises(ValueError, match="is empty"):
        override_condition("shop.orders", " ")


def test_vitess_refuses_overrides_with_the_reason(tmp_path):
    with pytest.raises(
        ConfigError, match=f"{OVERRIDES}: Vitess cannot filter its snapshots so: .*copy phase"
    ):
        load(tmp_path, VITESS, f"{OVERRIDES}: commerce.orders\n{OVERRIDES}.commerce.orders: id > 1\n")
