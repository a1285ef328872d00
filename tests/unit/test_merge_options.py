"""Per-table merge settings from the command line."""

import pytest

from cdc_core.errors import TidemarkError
from spark_jobs.merge.options import MergeOptions, default_broadcast_mb, memory_mb


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


def test_a_batch_is_broadcast_up_to_an_eighth_of_the_memory_holding_it_unless_set():
    conf = {"spark.driver.memory": "8g", "spark.executor.memory": "2048m"}.get
    assert default_broadcast_mb(lambda k, d: conf(k, d), local=True) == 1024
    assert default_broadcast_mb(lambda k, d: conf(k, d), local=False) == 256
    assert default_broadcast_mb(lambda k, d: d, local=True) == 128  # Spark's 1g default
    assert memory_mb("512M") == 512 and memory_mb("1024k") == 1 and memory_mb("300") == 300
    options = MergeOptions.from_args(None)
    assert options.for_table("shop.orders", 1024).broadcast_bytes == 1024 * 1024 * 1024
    assert MergeOptions.from_args(None, broadcast_mb=0).for_table("shop.orders", 1024).broadcast_bytes == 0
    with pytest.raises(TidemarkError, match="--broadcast-mb"):
        MergeOptions.from_args(None, broadcast_mb=-1)
