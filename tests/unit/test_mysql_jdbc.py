"""Spark's JDBC reader gets WHERE text, not parameters: every value must stay a value."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pymysql.constants import FIELD_TYPE

from cdc_core.connectors.mysql import jdbc
from cdc_core.connectors.mysql.chunk_reader import CONVERSIONS, select_list
from cdc_core.connectors.mysql.types import TypeModes, map_column
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.signals.conditions import parse_condition
from cdc_core.snapshot.chunks import ChunkPlan

TABLE = TableSchema(
    TableId("shop", "orders"),
    [
        Column("region", "VARCHAR", length=20, nullable=False),
        Column("id", "BIGINT", nullable=False),
        Column("note", "TEXT"),
        Column("at", "TIME", length=6),
    ],
    ("region", "id"),
)


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (None, "NULL"),
        (True, "1"),
        (-12, "-12"),
        (Decimal("1E+3"), "1000"),  # never exponent notation: that would compare as DOUBLE
        (Decimal("-0.0012"), "-0.0012"),
        (2.5, "2.5"),
        ("O'Brien", "_utf8mb4 X'4f27427269656e'"),
        ("", "_utf8mb4 X''"),
        (b"\x00\xff", "X'00ff'"),
        (dt.datetime(2024, 2, 29, 23, 59, 59, 123456), "'2024-02-29 23:59:59.123456'"),
        (dt.date(2024, 2, 29), "'2024-02-29'"),
        (-dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=500000), "'-12:34:56.500000'"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), "'838:59:59.000000'"),
    ],
)
def test_values_render_as_literals_that_cannot_end_a_string(value, sql):
    assert jdbc.literal(value) == sql


@pytest.mark.parametrize("value", [float("nan"), Decimal("NaN"), float("inf"), object()])
def test_values_without_a_literal_are_refused(value):
    with pytest.raises((TypeError, ValueError)):
        jdbc.literal(value)


def test_window_predicates_compare_row_values_and_keep_hostile_filter_values_as_data():
    hostile = "x'); DROP TABLE orders; -- "
    condition = parse_condition(
        f"note = '{hostile.replace(chr(39), chr(39) * 2)}' OR id IN (1, 2)", TABLE.column_names
    )
    plan = ChunkPlan(TABLE, ("region", "id"), condition)
    text = jdbc.predicate(plan, ("eu", 10), ("us", 20))
    assert text == (
        "(`region`, `id`) > (_utf8mb4 X'6575', 10) AND (`region`, `id`) <= (_utf8mb4 X'7573', 20) AND "
        f"((`note` = _utf8mb4 X'{hostile.encode().hex()}' OR `id` IN (1, 2)))"
    )
    assert "DROP" not in text and ";" not in text and "--" not in text


def test_open_ended_windows():
    plan = ChunkPlan(TABLE, ("id",))
    assert jdbc.predicate(plan, None, None) == "1 = 1"
    assert jdbc.predicate(plan, None, (5,)) == "`id` <= 5"
    assert jdbc.predicate(plan, (5,), None) == "`id` > 5"


def test_tables_with_columns_spark_cannot_read_exactly_keep_the_python_reader():
    assert jdbc.unreadable_columns(TABLE) == []
    assert jdbc.custom_schema(TABLE) == "`at` STRING"
    odd = TableSchema(
        TableId("shop", "places"),
        [Column("id", "INT"), Column("pos", "POINT"), Column("big", "DECIMAL", length=65, scale=30)],
        ("id",),
    )
    assert jdbc.unreadable_columns(odd) == ["pos (POINT)", "big (DECIMAL(65))"]


def test_float_columns_are_read_as_the_exact_double_and_datetimes_as_instants():
    """The text protocol prints a FLOAT with six digits; `* 1e0` widens it exactly (and
    keeps -0.0). Spark's JDBC reader moves a DATETIME before 1582 unless read as an instant."""
    plain = TableSchema(
        TableId("shop", "t"), [Column("id", "INT"), Column("at", "DATETIME", length=3)], ("id",)
    )
    assert jdbc.source_table(plain) == "`shop`.`t`"
    assert jdbc.custom_schema(plain) == "`at` TIMESTAMP"
    floats = TableSchema(TableId("shop", "t"), [Column("id", "INT"), Column("f", "FLOAT")], ("id",))
    assert select_list(floats) == "`id`, `f` * 1e0 AS `f`"
    assert jdbc.source_table(floats) == "(SELECT `id`, `f` * 1e0 AS `f` FROM `shop`.`t`) AS `t`"


def test_dates_python_cannot_hold_are_read_as_none_as_the_binlog_decoder_gives_them():
    assert CONVERSIONS[FIELD_TYPE.DATETIME]("0000-00-00 00:00:00") is None
    assert CONVERSIONS[FIELD_TYPE.TIMESTAMP]("0000-00-00 00:00:00.000") is None
    assert CONVERSIONS[FIELD_TYPE.DATE]("2024-00-00") is None
    assert CONVERSIONS[FIELD_TYPE.DATETIME]("1000-01-01 00:00:00.001") == dt.datetime(
        1000, 1, 1, 0, 0, 0, 1000
    )
    assert CONVERSIONS[FIELD_TYPE.DATE]("9999-12-31") == dt.date(9999, 12, 31)


@pytest.mark.parametrize(
    ("column", "binlog", "spark"),
    [
        (Column("t", "TIME", length=6), -dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=500000),
         "-12:34:56.500000"),
        (Column("t", "TIME"), dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59"),
        (Column("t", "TIME", length=3), dt.timedelta(microseconds=5000), "00:00:00.005"),
        (Column("b", "BIGINT", unsigned=True), 2**64 - 1, Decimal(2**64 - 1)),
        (Column("b", "BIT", length=1), "1", 1),
        (Column("b", "BIT", length=64), "1" + "0" * 63, -(2**63)),
    ],
)  # fmt: skip
def test_values_as_spark_stages_them_convert_like_binlog_values(column, binlog, spark):
    convert = map_column(column, TypeModes()).convert
    assert convert(spark) == convert(binlog)
