"""The merge's `from_json` over bytes (`spark_jobs.merge.json_reader`) gives Spark's rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cdc_core.errors import TidemarkError

pytestmark = pytest.mark.integration

SCHEMA = (
    "op STRING, n INT, tiny TINYINT, small SMALLINT, big BIGINT, f FLOAT, d DOUBLE, flag BOOLEAN,"
    " text STRING, doc STRING, list STRING, source STRUCT<ts_ms: BIGINT, db: STRING>,"
    " data_collections ARRAY<STRUCT<data_collection: STRING, event_count: BIGINT>>"
)

PAYLOADS = [
    '{"op":"c","n":7,"tiny":-128,"small":32767,"big":9223372036854775807,"f":1.5,"d":-2.25e-300,'
    '"flag":true,"text":"plain","doc":{"a":[1,{"b":null}]},"list":[1,2,"x"],'
    '"source":{"ts_ms":1700000000123,"db":"shop"},'
    '"data_collections":[{"data_collection":"shop.t","event_count":3},{"data_collection":"x","event_count":0}]}',
    '{"op":"u","text":"Zürich ☃ 🐳 \\u00e9\\n\\"quoted\\" \\ud83d\\ude00","source":{"db":"ł"}}',
    '  {"op" : "d" ,\n "n" : -1 , "d" : 1E308, "f" : -0.0 }  ',
    '{"op":"c","n":3000000000,"tiny":300,"big":1.5,"flag":"true","d":"NaN"}',
    '{"op":1,"text":2.50,"doc":"already text","list":null,"source":null}',
    '{"op":"c","op":"u","unknown":{"deep":[[[]]]},"n":1}',
    '{"op":"c","n":"x","text":"after the bad field"}',
    '{"op":"c","n":1,',
    "hello",
    "",
    "[]",
    '[{"op":"c"}]',
    "null",
    "{}",
    '{"data_collections":{"data_collection":"not a list"}}',
]


def test_rows_equal_spark_from_json_for_every_payload(spark):
    from pyspark.sql import functions as F

    from spark_jobs.merge.json_reader import from_json

    schema = spark.createDataFrame([], SCHEMA).schema
    frame = spark.createDataFrame(
        [(i, p) for i, p in enumerate(PAYLOADS)] + [(len(PAYLOADS), None)], "i INT, p STRING"
    )
    rows = frame.select(
        "i", F.from_json("p", schema).alias("spark"), from_json(spark, F.col("p"), schema).alias("ours")
    ).collect()
    assert len(rows) == len(PAYLOADS) + 1
    for row in rows:  # as text: a NaN is not equal to itself
        assert repr(row.ours) == repr(row.spark), PAYLOADS[row.i] if row.i < len(PAYLOADS) else None
    first = next(r.ours for r in rows if r.i == 0)
    assert (
        first.big == 9223372036854775807 and first.source.db == "shop" and first.doc == '{"a":[1,{"b":null}]}'
    )
    assert next(r.ours for r in rows if r.i == 1).text.startswith("Zürich ☃ 🐳 é\n")


def test_a_payload_cut_from_the_middle_of_a_value_reads_the_same(spark):
    """The payload the merge parses is cut out of a longer value by byte offsets
    (`spark_jobs.merge.cutting`): the reader must start at its first byte and stop at
    its last, not at the value's."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.json_reader import from_json

    schema = spark.createDataFrame([], SCHEMA).schema
    values = [
        (f'{{"schema":{{"x":"ä{i}"}},"payload":{p}}}', len(p.encode())) for i, p in enumerate(PAYLOADS[:8])
    ]
    frame = spark.createDataFrame(values, "v STRING, n INT").select(
        F.expr("CAST(substring(CAST(v AS BINARY), octet_length(v) - n, n) AS STRING)").alias("p")
    )
    rows = frame.select(
        F.from_json("p", schema).alias("spark"), from_json(spark, F.col("p"), schema).alias("ours")
    )
    got = rows.collect()
    assert [repr(r.ours) for r in got] == [repr(r.spark) for r in got]
    assert got[0].ours.op == "c" and got[1].ours.text.startswith("Zürich")


def test_bytes_that_are_not_utf8_make_the_record_malformed(spark):
    """Spark's reader would put U+FFFD in their place and merge a changed value; read
    as bytes the record has no `op`, so the merge's census refuses the batch."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.json_reader import from_json

    schema = spark.createDataFrame([], SCHEMA).schema
    frame = spark.sql("SELECT CAST(X'7B226F70223A2263222C2274657874223A2261FF227D' AS STRING) AS p")
    row = frame.select(
        F.from_json("p", schema).alias("spark"), from_json(spark, F.col("p"), schema).alias("ours")
    ).first()
    assert row.spark.text == "a\ufffd"
    assert row.ours.text is None and row.ours.op is None


def test_a_session_without_the_jar_or_the_jvm_is_refused_plainly(spark):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs.merge.json_reader import from_json

    with pytest.raises(TidemarkError, match="not on the Spark classpath: run `make install`"):
        from_json(SimpleNamespace(_jvm=None), F.col("p"), T.StructType())
