"""A snapshot release counts for the table its events' topic names (the merge's positions
per table), whatever characters the table's name holds."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_a_release_counts_for_the_table_its_topic_names(spark):
    from cdc_core.events.topics import table_topic
    from spark_jobs.merge.transactions import _table

    names = ["shop.orders", "shop.order items", "shop.prix€ (TTC)", "shop.t😀x", "my.db.a.b"]
    releases = spark.createDataFrame(
        [("tm.snapshot_releases", n) for n in names], "topic STRING, p_data_collection STRING"
    )
    counted = [r[0] for r in releases.select(_table("tm")).collect()]
    assert counted == [table_topic("tm", n)[len("tm.") :] for n in names]
    assert counted[3] == "shop.t__x"
