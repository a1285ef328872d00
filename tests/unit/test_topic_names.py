"""Table topics named as Debezium names them when a table's name holds characters Kafka
refuses in a topic name."""

from __future__ import annotations

import pytest

from cdc_core.events.topics import table_topic, topic_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tm.shop.orders", "tm.shop.orders"),
        ("tm.shop.order-items_2", "tm.shop.order-items_2"),
        ("tm.shop.order items", "tm.shop.order_items"),
        ("tm.shop.prix€ (TTC)", "tm.shop.prix___TTC_"),
        ("tm.shop.café", "tm.shop.caf_"),
        # Debezium counts Java's UTF-16 units: a character beyond the BMP is two.
        ("tm.shop.t😀", "tm.shop.t__"),
        ("tm.my.db.a.b", "tm.my.db.a.b"),  # dots stay: names may hold them
    ],
)
def test_each_refused_character_becomes_an_underscore(name, expected):
    assert topic_name(name) == expected


def test_a_table_topic_is_the_prefix_and_the_collection_so_named():
    assert table_topic("tm", "shop.order items") == "tm.shop.order_items"
