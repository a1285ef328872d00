"""`lakehouse.promoted.fields`: entries checked when the connector file loads, and each
promoted column read from the document's Extended JSON as the merge lands it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.errors import ConfigError, TidemarkError
from tests.unit.test_connector_config import write


def test_entries_are_per_collection_and_a_comma_inside_a_type_is_not_a_separator(tmp_path):
    from pyspark.sql import types as T

    from spark_jobs.merge.promoted import Promoted, parse

    text = "lakehouse.promoted.fields: shop.orders.total:decimal(12, 2), shop.orders.at:timestamp, a.b.c:BIGINT\n"
    config = load_config(write(tmp_path, text), environ={})
    assert parse(config.get("lakehouse.promoted.fields")) == {
        "shop.orders": (Promoted("total", T.DecimalType(12, 2)), Promoted("at", T.TimestampType())),
        "a.b": (Promoted("c", T.LongType()),),
    }


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("shop.orders.total", "is not db.collection.field:type"),
        ("orders.total:int", "is not db.collection.field:type"),
        ("shop.orders.total:money", "is not db.collection.field:type"),
        ("shop.orders.total:decimal(40,2)", "is not db.collection.field:type"),
        ("shop.orders._id:string", "cannot be a promoted column's name"),
        ("shop.orders._cdc_op:string", "cannot be a promoted column's name"),
        ("shop.orders.it's:string", "cannot be a promoted column's name"),
        ("[shop.orders.a:int, shop.orders.a:bigint]", "promoted twice"),
    ],
)
def test_a_malformed_entry_is_refused_when_the_file_loads(tmp_path, entry, message):
    value = entry if entry.startswith("[") else f'"{entry}"'
    with pytest.raises(ConfigError, match=rf"lakehouse\.promoted\.fields: .*{message}"):
        load_config(write(tmp_path, f"lakehouse.promoted.fields: {value}\n"), environ={})


def test_each_type_is_read_through_its_extended_json_wrapper(spark):
    """A value in the wrapper its type is written in, or plain, converts; one that does
    not convert, or is absent, is null (the document keeps it)."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.promoted import parse, with_columns

    documents = [
        '{"_id": 1, "s": "text", "i": {"$numberLong": "7"}, "d": {"$numberDecimal": "1.235"}, '
        '"t": {"$date": 1751327999250}, "o": {"$oid": "0000000000000000000000ab"}, "b": true, "f": 2.5}',
        '{"_id": 2, "s": 5, "i": "12", "d": 3, "t": "2025-03-01T10:00:00Z", "o": "plain", "b": "maybe", '
        '"f": {"$numberLong": "3"}}',
        '{"_id": 3, "i": "many", "d": [1], "t": {"$date": {"$numberLong": "-1000"}}, "f": "1e3"}',
    ]
    entries = ["s:string", "i:int", "d:decimal(10,2)", "t:timestamp", "o:string", "b:boolean", "f:double"]
    spec = parse([f"x.y.{e}" for e in [*entries, "missing:date"]])["x.y"]
    rows = spark.createDataFrame([(d,) for d in documents], "document STRING")
    landed = with_columns(rows, spec).select(
        F.get_json_object("document", "$._id").cast("int").alias("k"), *[p.field for p in spec]
    )
    got = {r["k"]: r.asDict() for r in landed.collect()}
    for row in got.values():
        if row["t"] is not None:  # Spark gives a naive time in the local zone
            row["t"] = row["t"].astimezone(dt.UTC)
    utc = dt.UTC
    assert got[1] == {
        "k": 1, "s": "text", "i": 7, "d": Decimal("1.24"), "t": dt.datetime(2025, 6, 30, 23, 59, 59, 250000, utc),
        "o": "0000000000000000000000ab", "b": True, "f": 2.5, "missing": None,
    }  # fmt: skip
    assert got[2] == {
        "k": 2, "s": "5", "i": 12, "d": Decimal("3.00"), "t": dt.datetime(2025, 3, 1, 10, tzinfo=utc),
        "o": "plain", "b": None, "f": 3.0, "missing": None,
    }  # fmt: skip
    assert got[3] == {
        "k": 3, "s": None, "i": None, "d": None, "t": dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc),
        "o": None, "b": None, "f": 1000.0, "missing": None,
    }  # fmt: skip


def test_a_promotion_of_a_table_without_documents_is_refused(spark, tmp_path):
    from spark_jobs.merge.promoted import fill_new, parse

    path = str(tmp_path / "shop.orders")
    spark.createDataFrame([(1, "a")], "id INT, name STRING").write.format("delta").save(path)
    stored = spark.read.format("delta").load(path).schema
    with pytest.raises(TidemarkError, match="shop.orders, whose Delta table holds no documents"):
        fill_new(spark, path, stored, parse(["shop.orders.name:string"])["shop.orders"])
