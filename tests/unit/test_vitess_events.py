"""VStream events → log items: transactions whole, their order key from their shard's
position, positions that resume exactly, copy batches marked as not replayable, DDL and
FIELD-described schema changes (built from Vitess's own messages, no server needed)."""

from __future__ import annotations

from cdc_core.connectors.vitess.events import EventAssembler
from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import query_pb2 as q
from cdc_core.connectors.vitess.vgtid import ShardGtid, Vgtid
from cdc_core.schema.model import TableId
from cdc_core.source import PositionAdvance, RowChange, SchemaChange, TransactionBegin, TransactionCommit

T = bd.VEventType
ITEMS = TableId("ks", "items")


def vgtid(**gtids: str) -> bd.VGtid:
    return bd.VGtid(shard_gtids=[bd.ShardGtid(keyspace="ks", shard=s, gtid=g) for s, g in gtids.items()])


def fields(shard: str, *extra: q.Field) -> bd.VEvent:
    cols = [
        q.Field(name="id", type=q.INT64, flags=1 | 2 | 32768, column_type="bigint(20)"),
        q.Field(name="name", type=q.VARCHAR, charset=45, column_type="varchar(32)"),
        *extra,
    ]
    return bd.VEvent(type=T.FIELD, field_event=bd.FieldEvent(table_name="ks.items", fields=cols, shard=shard))


def row(shard: str, before: list | None, after: list | None) -> bd.VEvent:
    def encode(values):
        lengths = [-1 if v is None else len(v) for v in values]
        return q.Row(lengths=lengths, values=b"".join(v for v in values if v is not None))

    change = bd.RowChange(before=encode(before) if before else None, after=encode(after) if after else None)
    return bd.VEvent(
        type=T.ROW, row_event=bd.RowEvent(table_name="ks.items", row_changes=[change], shard=shard)
    )


def assembler(start: Vgtid, epochs=None) -> EventAssembler:
    return EventAssembler("srv", "ks", start, epochs or {}, {}, q.Type.Name)


def feed(a: EventAssembler, events: list, partial: bool = False) -> list:
    out = []
    for e in events:
        out += a.feed(e, T, partial)
    return out


START = Vgtid((ShardGtid("ks", "-80", "MariaDB/0-11-5"), ShardGtid("ks", "80-", "MariaDB/0-12-7")))


def test_a_transaction_is_handed_on_whole_with_its_shards_order_key_and_exact_positions():
    a = assembler(START, {"-80": 0, "80-": 0})
    items = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="80-", timestamp=100),
            fields("80-"),
            row("80-", None, [b"1", b"one"]),
            row("80-", [b"1", b"one"], [b"2", b"one"]),  # a primary-key change
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-5", "80-": "MariaDB/0-12-8"})),
            bd.VEvent(type=T.COMMIT, shard="80-", timestamp=100),
        ],
    )
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["TransactionBegin", "SchemaChange", "RowChange", "RowChange", "TransactionCommit"]
    begin, created, insert, update, commit = items
    assert isinstance(begin, TransactionBegin) and begin.replayable
    assert (begin.epoch, begin.rank, begin.ts_ms) == (0, 8, 100_000)
    assert begin.id == a.vgtid.to_json()  # the transaction id is its VGTID, as Debezium's
    assert begin.restart == {"vgtid": START.to_json(), "epochs": {"-80": 0, "80-": 0}, "shard": "80-"}
    # what `delivery_order` records before the items leave the source, once
    assert a.take_groups() == [("80-", "MariaDB/0-12-8")] and a.take_groups() == []
    assert isinstance(created, SchemaChange) and created.kind == "create_table" and created.ddl is None
    assert created.tables[0].primary_key == ("id",)
    assert isinstance(insert, RowChange) and (insert.op, insert.after) == ("c", (1, "one"))
    assert (update.op, update.before, update.after) == ("u", (1, "one"), (2, "one"))
    assert (
        insert.source["shard"] == "80-" and insert.source["vgtid"] == begin.id and insert.source["db"] == ""
    )
    assert isinstance(commit, TransactionCommit)
    assert commit.position == {"vgtid": begin.id, "epochs": {"-80": 0, "80-": 0}}


def test_a_restart_reading_one_shard_alone_keeps_every_shards_position():
    a = assembler(START, {"-80": 0, "80-": 0})
    feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80", timestamp=1),
            fields("-80"),
            row("-80", None, [b"3", None]),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-6"})),  # the lone shard's VGTID
            bd.VEvent(type=T.COMMIT, shard="-80", timestamp=1),
        ],
        partial=True,
    )
    assert a.vgtid.shard("-80").gtid == "MariaDB/0-11-6"
    assert a.vgtid.shard("80-").gtid == "MariaDB/0-12-7", "the other shard's position was lost"


def test_copy_batches_are_not_replayable_and_an_empty_tables_double_begin_is_absorbed():
    copying = Vgtid((ShardGtid("ks", "-80", ""),))
    a = assembler(copying)
    lastpk = bd.TableLastPK(table_name="items", lastpk=q.QueryResult(rows=[q.Row(lengths=[1], values=b"9")]))
    snap = bd.VGtid(shard_gtids=[bd.ShardGtid(keyspace="ks", shard="-80", gtid="MariaDB/0-11-40")])
    progress = bd.VGtid(
        shard_gtids=[bd.ShardGtid(keyspace="ks", shard="-80", gtid="MariaDB/0-11-40", table_p_ks=[lastpk])]
    )
    items = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80"),
            fields("-80"),
            bd.VEvent(type=T.VGTID, vgtid=snap),
            row("-80", None, [b"9", b"nine"]),
            bd.VEvent(type=T.VGTID, vgtid=progress),
            bd.VEvent(type=T.COMMIT, shard="-80"),  # copy batches carry no timestamp
        ],
    )
    begin = items[0]
    assert isinstance(begin, TransactionBegin) and not begin.replayable
    assert begin.epoch == 0  # the stream's first
    assert a.vgtid.copying()
    # an empty table: BEGIN, FIELD, then BEGIN, VGTID, COMMIT
    feed(a, [bd.VEvent(type=T.BEGIN, shard="-80"), fields("-80")])
    done = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80"),
            bd.VEvent(type=T.VGTID, vgtid=snap),
            bd.VEvent(type=T.COMMIT, shard="-80"),
        ],
    )
    assert [type(i).__name__ for i in done] == ["TransactionBegin", "TransactionCommit"]
    assert not a.vgtid.copying()


def test_ddl_other_and_a_new_field_list_move_the_position_and_describe_the_change():
    a = assembler(START, {"-80": 0, "80-": 0})
    feed(a, [bd.VEvent(type=T.BEGIN, shard="-80", timestamp=1), fields("-80")])
    feed(
        a,
        [
            row("-80", None, [b"1", b"x"]),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-7"})),
            bd.VEvent(type=T.COMMIT, shard="-80", timestamp=1),
        ],
    )
    ddl = feed(
        a,
        [
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-7", "80-": "MariaDB/0-12-7"})),
            bd.VEvent(
                type=T.DDL, shard="-80", statement="ALTER TABLE items ADD COLUMN extra INT", timestamp=2
            ),
        ],
    )
    (change,) = ddl
    assert isinstance(change, SchemaChange) and change.kind == "alter_table" and change.affected == ()
    assert change.position["vgtid"] == a.vgtid.to_json() and a.vgtid.shard("-80").gtid == "MariaDB/0-11-7"
    wider = fields("-80", q.Field(name="extra", type=q.INT32, flags=32768, column_type="int(11)"))
    items = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80", timestamp=3),
            wider,
            row("-80", None, [b"2", b"y", b"5"]),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-8", "80-": "MariaDB/0-12-7"})),
            bd.VEvent(type=T.COMMIT, shard="-80", timestamp=3),
        ],
    )
    altered = items[1]
    assert isinstance(altered, SchemaChange) and altered.kind == "alter_table"
    assert [c.name for c in altered.tables[0].columns] == ["id", "name", "extra"]
    assert items[2].after == (2, "y", 5)
    (other,) = feed(
        a,
        [
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-9", "80-": "MariaDB/0-12-7"})),
            bd.VEvent(type=T.OTHER, shard="-80"),
        ],
    )
    assert isinstance(other, PositionAdvance) and a.vgtid.shard("-80").gtid == "MariaDB/0-11-9"
    assert ITEMS in a.tables


def test_a_reshard_gives_the_new_shards_an_epoch_above_their_parent():
    a = assembler(START, {"-80": 0, "80-": 3})
    after = vgtid(**{"-80": "MariaDB/0-11-5", "80-c0": "MariaDB/0-13-2", "c0-": "MariaDB/0-14-2"})
    (begin, *_rest) = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="80-c0", timestamp=1),
            fields("80-c0"),
            row("80-c0", None, [b"1", b"x"]),
            bd.VEvent(type=T.VGTID, vgtid=after),
            bd.VEvent(type=T.COMMIT, shard="80-c0", timestamp=1),
        ],
    )
    assert (begin.epoch, begin.rank) == (4, 2), "the new shard's low ranks must still order after 80-'s"
    assert a.epochs["80-c0"] == 4
    # its sibling's first transaction, later, still inherits from the replaced shard
    (sibling, *_rest) = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="c0-", timestamp=2),
            fields("c0-"),
            row("c0-", None, [b"9", b"y"]),
            bd.VEvent(
                type=T.VGTID,
                vgtid=vgtid(**{"-80": "MariaDB/0-11-5", "80-c0": "MariaDB/0-13-2", "c0-": "MariaDB/0-14-3"}),
            ),
            bd.VEvent(type=T.COMMIT, shard="c0-", timestamp=2),
        ],
    )
    assert sibling.epoch == 4


def test_a_copy_cut_between_tables_resumes_with_the_tables_a_shard_has_not_begun():
    """VTGate's VGTID shows a shard that finished one table and has not begun the next
    with a GTID and no `table_p_ks`, which VStream reads as "copy done": the offsets name
    the tables still to begin, and the resumed request asks for each from its first row."""
    from cdc_core.connectors.vitess.copy_progress import CopyProgress

    copying = Vgtid((ShardGtid("ks", "-80", ""), ShardGtid("ks", "80-", "")))
    a = EventAssembler("srv", "ks", copying, {}, {}, q.Type.Name, copy=CopyProgress(("aaa", "items")))

    def empty_table(shard: str, gtid: dict) -> list:  # [BEGIN, FIELD], [VGTID], [BEGIN, VGTID, COMMIT]
        field = bd.FieldEvent(
            table_name="ks.aaa", fields=[q.Field(name="id", type=q.INT64, flags=3)], shard=shard
        )
        return [
            bd.VEvent(type=T.BEGIN, shard=shard),
            bd.VEvent(type=T.FIELD, field_event=field, shard=shard),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**gtid)),
            bd.VEvent(type=T.BEGIN, shard=shard),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**gtid)),
            bd.VEvent(type=T.COMMIT, shard=shard),
        ]

    items = feed(a, empty_table("-80", {"-80": "MariaDB/0-11-5", "80-": ""}))
    items += feed(a, empty_table("80-", {"-80": "MariaDB/0-11-5", "80-": "MariaDB/0-12-7"}))
    assert [type(i).__name__ for i in items].count("SchemaChange") == 1  # carried into the batch
    offset = items[-1].position
    assert offset["copy"] == {
        "tables": ["aaa", "items"],
        "started": {"-80": ["aaa"], "80-": ["aaa"]},
        "done": [],
    }
    resumed = EventAssembler(
        "srv", "ks", Vgtid.from_json(offset["vgtid"]), {}, {}, q.Type.Name,
        copy=CopyProgress.from_json(offset["copy"]),
    )  # fmt: skip
    request = resumed.request(resumed.vgtid)
    assert [(s.shard, s.gtid, s.table_p_ks) for s in request.shards] == [
        ("-80", "MariaDB/0-11-5", ({"table_name": "items"},)),
        ("80-", "MariaDB/0-12-7", ({"table_name": "items"},)),
    ]
    # a shard whose copy completed asks for nothing more; the last COPY_COMPLETED ends it all
    feed(resumed, [bd.VEvent(type=T.COPY_COMPLETED, keyspace="ks", shard="-80")])
    assert [s.table_p_ks for s in resumed.request(resumed.vgtid).shards] == [(), ({"table_name": "items"},)]
    feed(resumed, [bd.VEvent(type=T.COPY_COMPLETED)])
    assert resumed.request(resumed.vgtid) == resumed.vgtid and "copy" not in resumed.position()


def test_a_truncate_is_a_schema_change_with_a_warning_that_its_rows_stay_downstream(caplog):
    """Vitess streams a TRUNCATE as DDL, and no truncate event follows (Debezium's Vitess
    connector emits none either): the rows stay in Delta, which is said where it happens."""
    import logging

    a = assembler(START, {"-80": 0, "80-": 0})
    with caplog.at_level(logging.WARNING, "tidemark.vitess"):
        (change,) = feed(
            a,
            [
                bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-7", "80-": "MariaDB/0-12-7"})),
                bd.VEvent(type=T.DDL, shard="-80", statement="truncate table items", timestamp=2),
            ],
        )
    assert isinstance(change, SchemaChange) and change.kind == "truncate_table"
    assert "truncate table items on shard -80" in caplog.text and "snapshot it again" in caplog.text


def test_a_shards_first_transaction_restarts_from_the_position_the_stream_named_it_at():
    """Started from `current` for the whole keyspace, VTGate names each shard's position in
    a VGTID event before any transaction: a restart inside the first one reads that shard
    from there, not from a position without it (which VTGate refuses)."""
    a = assembler(Vgtid((ShardGtid("ks", "", "current"),)))
    resolved = {"-80": "MariaDB/0-11-5", "80-": "MariaDB/0-12-7"}
    (begin, *_rest) = feed(
        a,
        [
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**resolved)),
            bd.VEvent(type=T.BEGIN, shard="-80", timestamp=1),
            fields("-80"),
            row("-80", None, [b"1", b"x"]),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{**resolved, "-80": "MariaDB/0-11-6"})),
            bd.VEvent(type=T.COMMIT, shard="-80", timestamp=1),
        ],
    )
    restart = Vgtid.from_json(begin.restart["vgtid"])
    assert restart.only("-80").shards == (ShardGtid("ks", "-80", "MariaDB/0-11-5"),)
    assert begin.restart["shard"] == "-80"


def test_a_merge_back_to_a_retired_shard_name_orders_after_the_shards_it_replaces():
    """-80 split into -40 and 40-80 (epoch 1), then merged back into a new -80: its events
    must order after theirs, though the name had epoch 0 before the split."""
    a = assembler(
        Vgtid((ShardGtid("ks", "-40", "MariaDB/0-21-9"), ShardGtid("ks", "40-80", "MariaDB/0-22-9"))),
        {"-80": 0, "-40": 1, "40-80": 1},
    )
    (begin, *_rest) = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80", timestamp=1),
            fields("-80"),
            row("-80", None, [b"1", b"x"]),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-31-3"})),
            bd.VEvent(type=T.COMMIT, shard="-80", timestamp=1),
        ],
    )
    assert (begin.epoch, begin.rank) == (2, 3)


def test_after_a_lost_vgtid_every_shard_orders_above_the_lost_positions_epochs():
    """snapshot.mode when_needed copies again from `""`: a shard the copy names (no epoch
    of its own in the new stream) and one the copy meets under a new name (a reshard since)
    both start above every epoch of the lost position, which the offsets keep."""
    a = EventAssembler("srv", "ks", Vgtid((ShardGtid("ks", "", ""),)), {}, {}, q.Type.Name, epoch_floor=6)
    snap = vgtid(**{"-80": "MariaDB/0-11-40"})
    (begin, *_rest) = feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80"),
            fields("-80"),
            bd.VEvent(type=T.VGTID, vgtid=snap),
            row("-80", None, [b"9", b"nine"]),
            bd.VEvent(type=T.COMMIT, shard="-80"),
        ],
    )
    assert begin.epoch == 6, "a copied row orders before the lost stream's events of its key"
    assert a.position()["epoch_floor"] == 6  # kept in the offsets: a restart goes on above it


def test_the_end_of_the_copy_phase_moves_the_position_past_it():
    """`initial_only` stops once the log is past the copy phase: its end is a position of
    its own, committed even when no transaction follows."""
    from cdc_core.connectors.vitess.connector import CONNECTOR
    from cdc_core.connectors.vitess.copy_progress import CopyProgress

    copying = Vgtid((ShardGtid("ks", "-80", ""),))
    a = EventAssembler("srv", "ks", copying, {}, {}, q.Type.Name, copy=CopyProgress(("items",)))
    assert not CONNECTOR.initial_snapshot_done(a.position())
    feed(
        a,
        [
            bd.VEvent(type=T.BEGIN, shard="-80"),
            fields("-80"),
            bd.VEvent(type=T.VGTID, vgtid=vgtid(**{"-80": "MariaDB/0-11-40"})),
            row("-80", None, [b"9", b"nine"]),
            bd.VEvent(type=T.COMMIT, shard="-80"),
        ],
    )
    assert not CONNECTOR.initial_snapshot_done(a.position()), "the copy is still in the offsets"
    assert feed(a, [bd.VEvent(type=T.COPY_COMPLETED, keyspace="ks", shard="-80")]) == []
    (moved,) = feed(a, [bd.VEvent(type=T.COPY_COMPLETED)])
    assert isinstance(moved, PositionAdvance) and CONNECTOR.initial_snapshot_done(moved.position)
