"""Which column type changes the merge lets Delta widen, and which it refuses."""

import pytest
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge.evolution import check, widens


def schema(**columns):
    return T.StructType([T.StructField(n, t) for n, t in columns.items()])


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        (T.IntegerType(), T.LongType(), True),
        (T.ShortType(), T.IntegerType(), True),
        (T.LongType(), T.IntegerType(), False),
        (T.FloatType(), T.DoubleType(), True),
        (T.DateType(), T.TimestampNTZType(), True),
        (T.DecimalType(10, 2), T.DecimalType(12, 4), True),
        (T.DecimalType(10, 2), T.DecimalType(10, 4), False),  # fewer integer digits
        (T.IntegerType(), T.DecimalType(12, 2), True),
        (T.IntegerType(), T.StringType(), False),
    ],
)
def test_widening_rules(old, new, ok):
    assert widens(old, new) is ok


def test_added_columns_and_older_narrower_events_need_nothing():
    stored = schema(id=T.LongType(), v=T.StringType())
    assert check("t", stored, schema(id=T.IntegerType(), v=T.StringType(), added=T.DoubleType())) is False


def test_a_wider_type_asks_for_widening_and_text_for_a_number_is_refused():
    stored = schema(id=T.IntegerType())
    assert check("t", stored, schema(id=T.LongType())) is True
    with pytest.raises(TidemarkError, match="t: column id changed from int to string"):
        check("t", stored, schema(id=T.StringType()))
