"""A refused signal says why, in words the sender can act on: what the signal lacks, that
the table it names exists but the capture filters leave it out (and which filter), that a
filter is JavaScript or a MongoDB query document where the table takes the grammar."""

from __future__ import annotations

import orjson

from cdc_core.connectors.mysql.key_values import key_value as MYSQL_KEYS
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.source import RowChange

ORDERS = TableId("shop", "orders")
SECRETS = TableId("shop", "secrets")
SIG = TableId("shop", "debezium_signal")
SIGNALS = TableSchema(
    SIG, (Column("id", "BSON"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
COLLECTION = TableSchema(
    ORDERS, (Column("_id", "BSON"), Column("document", "DOCUMENT")), ("_id",), documents=True
)
TABLE = TableSchema(ORDERS, (Column("id", "INT", nullable=False), Column("color", "VARCHAR")), ("id",))
SOURCE = {"snapshot": "false", "db": "shop", "collection": "debezium_signal"}


class Session:
    """The source's plain connection, as the stage opens it to list the tables that exist."""

    closed = 0

    def list_tables(self):
        return [ORDERS, SECRETS, SIG]

    def close(self):
        Session.closed += 1


def stage(tmp_path, schema=COLLECTION):
    """A streamer's stage that knows the captured tables only, as a MongoDB streamer does."""
    return SnapshotStage(
        SnapshotContext(),
        {ORDERS: schema, SIG: SIGNALS},
        lambda t: t == ORDERS,
        SIG,
        LocalStaging(tmp_path),
        chunk_size=10,
        key_value=MYSQL_KEYS,
        open_chunk_source=Session,
        excluded_by=lambda t: "not matched by collection.include.list" if t != ORDERS else "",
    )


def signal(id_, type_, data):
    data = data if data is None or isinstance(data, str) else orjson.dumps(data).decode()
    return RowChange(SIGNALS, "c", None, (id_, type_, data), dict(SOURCE), 1)


def refused(s) -> list[str]:
    return [r["reason"] for r in s.context.refused]


def test_a_signal_without_a_type_is_refused_naming_what_it_lacks(tmp_path):
    s = stage(tmp_path)
    s.process([signal("sig-1", None, {"data-collections": ["shop.orders"]})])
    s.process([signal("sig-2", 7, {"data-collections": ["shop.orders"]})])
    s.process([signal(None, "execute-snapshot", {"data-collections": ["shop.orders"]})])
    first, second, third = refused(s)
    assert first.startswith("not a signal: it has no type (a signal is {id, type, data}")
    assert "execute-snapshot, stop-snapshot" in first
    assert second.startswith("not a signal: its type is a int (7), not text")
    assert third.startswith("not a signal: it has no id")
    assert s.context.active() is None


def test_a_collection_outside_the_capture_filters_is_named_as_such(tmp_path):
    """The streamer's schemas hold the captured collections only: a signal naming an
    existing collection the filters leave out was refused as matching "no known table"."""
    s = stage(tmp_path)
    before = Session.closed
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.secrets"]})])
    (reason,) = refused(s)
    assert "'shop.secrets' matches only tables outside the capture list" in reason
    assert "shop.secrets: not matched by collection.include.list" in reason
    assert Session.closed == before + 1  # the listing's session is closed again
    s.process([signal("sig-2", "execute-snapshot", {"data-collections": ["shop.nothing"]})])
    assert refused(s)[-1] == "'shop.nothing' matches no known table"
    assert s.context.active() is None


def test_javascript_in_a_debezium_form_filter_is_refused_with_that_reason(tmp_path):
    s = stage(tmp_path)
    for n, query in enumerate(['{"$where": "sleep(1000) || true"}', {"qty": {"$expr": {"$gt": 1}}}]):
        filters = [{"data-collection": "shop.orders", "filter": query}]
        s.process(
            [
                signal(
                    f"sig-{n}",
                    "execute-snapshot",
                    {"data-collections": ["shop.orders"], "additional-conditions": filters},
                )
            ]
        )
    where, expr = refused(s)
    assert where == "$where is not allowed in a filter: it runs JavaScript on the server"
    assert expr.startswith(
        "$expr is not allowed in a filter: it takes aggregation expressions, which can run"
    )
    assert s.context.active() is None


def test_a_debezium_form_filter_on_a_sql_table_says_to_use_the_grammar(tmp_path):
    s = stage(tmp_path, TABLE)
    filters = [{"data-collection": "shop.orders", "filter": {"color": "blue"}}]
    s.process(
        [
            signal(
                "sig-1",
                "execute-snapshot",
                {"data-collections": ["shop.orders"], "additional-conditions": filters},
            )
        ]
    )
    (reason,) = refused(s)
    assert (
        "filters a document collection; this table's filter is written in the grammar, e.g. color = 'blue'"
        in reason
    )


def test_a_debezium_form_filter_as_an_object_starts_the_snapshot_with_its_text(tmp_path):
    s = stage(tmp_path)
    filters = [{"data-collection": "shop.orders", "filter": {"color": "blue", "qty": {"$gte": 2}}}]
    s.process(
        [
            signal(
                "sig-1",
                "execute-snapshot",
                {"data-collections": ["shop.orders"], "additional-conditions": filters},
            )
        ]
    )
    assert refused(s) == []
    (progress,) = s.context.active().tables
    assert orjson.loads(progress.condition) == {"color": "blue", "qty": {"$gte": 2}}
