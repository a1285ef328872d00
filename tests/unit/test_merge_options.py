"""Per-table merge settings from the command line."""

import pytest

from cdc_core.errors import TidemarkError
from spark_jobs.merge.options import MergeOptions


def test_tables_get_their_own_settings():
    options = MergeOptions.from_args(r"shop\.(orders|items)", ["shop.orders=day"], ["shop.items=sku, store"])
    assert options.for_table("shop.orders").scd2 and options.for_table("shop.orders").partition_by == ("day",)
    assert options.for_table("shop.items").cluster_by == ("sku", "store")
    other = options.for_table("shop.ordersx")
    assert not other.scd2 and other.partition_by == () and other.cluster_by == ()


@pytest.mark.parametrize(
    ("scd2", "partition", "message"),
    [("(", [], "not a regular expression"), (None, ["shop.orders"], "expected db.table=column")],
)
def test_bad_settings_are_refused_clearly(scd2, partition, message):
    with pytest.raises(TidemarkError, match=message):
        MergeOptions.from_args(scd2, partition)
