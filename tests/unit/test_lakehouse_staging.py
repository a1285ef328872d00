"""Lakehouse staging (`spark_jobs/staged_types.py`) without Spark's JVM: each column in
the Delta type the merge gives its events, the Python reader's values as the merge lands
their events, and one Parquet schema for every window of a table, all-NULL and empty
windows included. (tests/integration/test_snapshot_release_types.py checks them against
Spark's merge, with Spark's JDBC reader too.)"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow.parquet as pq

from cdc_core.filters import ColumnRules
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import write_parquet
from spark_jobs import staged_types
from tests.unit.test_dispatcher import FakeSource, config

POINT = bytes.fromhex("e61000000101000000000000000000f03f0000000000000040")  # SRID 4326, (1 2)
TABLE = TableSchema(
    TableId("shop", "all"),
    (
        Column("id", "INT", nullable=False),
        Column("ti", "TINYINT"),
        Column("bu", "BIGINT", unsigned=True),
        Column("f", "FLOAT"),
        Column("dec", "DECIMAL", length=38, scale=10),
        Column("dw", "DECIMAL", length=65, scale=30),
        Column("dt3", "DATETIME", length=3),
        Column("dz", "DATETIME", nullable=False),
        Column("ts", "TIMESTAMP", length=6),
        Column("da", "DATE"),
        Column("tm", "TIME", length=6),
        Column("y", "YEAR"),
        Column("s", "SET", enum_values=("x", "y")),
        Column("bit1", "BIT", length=1),
        Column("bit10", "BIT", length=10),
        Column("vb", "VARBINARY", length=10),
        Column("g", "POINT"),
        Column("secret", "VARCHAR", length=20),
    ),
    ("id",),
)
# As the Python reader reads them (pymysql), then as the merge lands their events.
READ = (
    1, -5, 2**64 - 1, 1.5, decimal.Decimal("9" * 28 + "." + "9" * 10), decimal.Decimal("-1E-30"),
    dt.datetime(1000, 1, 1, 0, 0, 0, 1000), None, dt.datetime(2038, 1, 19, 3, 14, 7, 999999),
    dt.date(1969, 12, 31), -dt.timedelta(microseconds=1), 0, "x,y", b"\x01", b"\x02\x01", b"\x00", POINT, "pw",
)  # fmt: skip
LANDED = (
    1, -5, -1, 1.5, decimal.Decimal("9" * 28 + "." + "9" * 10), "-0." + "0" * 29 + "1",
    dt.datetime(1000, 1, 1, 0, 0, 0, 1000), dt.datetime(1970, 1, 1),
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC), dt.date(1969, 12, 31), -1, 0, "x,y", True,
    b"\x01\x02", b"\x00", '{"x":1.0,"y":2.0,"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326}', "****",
)  # fmt: skip


def form_of(tmp_path) -> StagedForm:
    rules = ColumnRules(config(tmp_path, "column.mask.with.4.chars: shop.all.secret\n"))
    return StagedForm(TABLE, rules, FakeSource().type_mapper(), ("id",))


def test_each_column_is_staged_in_the_delta_type_of_its_events(tmp_path):
    schema = staged_types.delta_schema(form_of(tmp_path))
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("id", "int"), ("ti", "smallint"), ("bu", "bigint"), ("f", "float"), ("dec", "decimal(38,10)"),
        ("dw", "string"), ("dt3", "timestamp_ntz"), ("dz", "timestamp_ntz"), ("ts", "timestamp"), ("da", "date"),
        ("tm", "bigint"), ("y", "int"), ("s", "string"), ("bit1", "boolean"), ("bit10", "binary"),
        ("vb", "binary"), ("g", "string"), ("secret", "string"),
    ]  # fmt: skip


def test_python_read_values_become_what_the_merge_lands_from_their_events(tmp_path):
    form = form_of(tmp_path)
    staged = staged_types.python_rows(form, [form.shape(READ), form.shape((2,) + (None,) * 17)])
    assert staged[0] == LANDED
    # NULL stays NULL, but a NOT NULL DATETIME's zero date (None) is the epoch, as in its events.
    assert staged[1] == (2,) + (None,) * 6 + (dt.datetime(1970, 1, 1),) + (None,) * 10


def test_every_window_of_a_table_has_one_parquet_schema_whatever_its_values(tmp_path):
    form = form_of(tmp_path)
    types = staged_types.arrow_types(staged_types.delta_schema(form))
    windows = {
        "full": staged_types.python_rows(form, [form.shape(READ)]),
        "nulls": staged_types.python_rows(form, [form.shape((2,) + (None,) * 17)]),
        "empty": [],
    }
    schemas = set()
    for name, rows in windows.items():
        write_parquet(str(tmp_path / f"{name}.parquet"), form.columns, rows, types=types)
        schemas.add(pq.read_schema(tmp_path / f"{name}.parquet").remove_metadata())
    assert len(schemas) == 1
    assert pq.read_table(tmp_path / "full.parquet").to_pylist()[0] == dict(
        zip(form.columns, LANDED, strict=True)
    )


def test_a_nested_value_is_staged_as_the_text_spark_keeps_for_it():
    """Spark's JSON reader keeps a struct it reads as text re-written by Jackson: doubles as
    Java's Double.toString, which the Python reader's staged text must equal byte for byte."""
    from spark_jobs.merge.connect_types import json_text

    point = {"x": -1e308, "y": 1e-300, "wkb": "AQ==", "srid": None}
    assert json_text(point) == '{"x":-1.0E308,"y":1.0E-300,"wkb":"AQ==","srid":null}'
    texts = [json_text(v) for v in (3.0, -0.0, 0.001, 9e-4, 1234567.0, 12345678.0, 1.7976931348623157e308)]
    assert texts == ["3.0", "-0.0", "0.001", "9.0E-4", "1234567.0", "1.2345678E7", "1.7976931348623157E308"]
    assert json_text([1, "é", [True]]) == '[1,"é",[true]]'
