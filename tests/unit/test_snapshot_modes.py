"""What `snapshot.mode` asks of the streamer after the first start: `when_needed` marks
the committed offset when its position can no longer be resumed and starts again from
the source's position now, every captured table snapshotted, running snapshots
abandoned, the rest of the snapshot state kept; `initial_only` stops once no snapshot is
running. `snapshot.select.statement.overrides` filter the snapshots Tidemark starts
itself and blocking ones, not signalled incremental ones."""

from __future__ import annotations

import orjson
import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mysql.key_values import key_value as MYSQL_KEYS
from cdc_core.errors import PositionLostError, SourceUnavailableError, TidemarkError
from cdc_core.pipeline.snapshot_modes import (
    POSITION_LOST,
    initial_only_done,
    lost_position,
    open_source,
    session_resume,
    start_again,
)
from cdc_core.pipeline.snapshot_setup import snapshot_stage
from cdc_core.pipeline.state import StateLayout
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.context import Snapshot, SnapshotContext, TableProgress
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.source import RowChange

CONFIG = """
name: shop
connector.class: mysql
topic.prefix: shop
database.hostname: 127.0.0.1
database.user: tidemark
database.server.id: 5401
signal.data.collection: tidemark.debezium_signal
table.include.list: shop\\..*
"""
ORDERS = TableSchema(
    TableId("shop", "orders"), (Column("id", "INT", nullable=False), Column("status", "VARCHAR")), ("id",)
)
ITEMS = TableSchema(
    TableId("shop", "items"), (Column("id", "INT", nullable=False), Column("v", "INT")), ("id",)
)
SIG = TableId("tidemark", "debezium_signal")
SIGNALS = TableSchema(
    SIG, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
COMMITTED = {"source": {"file": "bin.000003", "pos": 900, "epoch": 2}, "in_txn": False, "rows_done": 0}


def config(tmp_path, extra=""):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + f"state.directory: {tmp_path / 'state'}\n" + extra)
    return load_config(path, environ={})


class Source:
    """What `snapshot_stage` asks of a source, and which way it was opened."""

    def __init__(self):
        self.opened = None

    def open(self, offset):
        self.opened = ("open", offset)

    def open_after_loss(self, lost):
        self.opened = ("after loss", lost)

    def current_tables(self):
        return {ORDERS.id: ORDERS, ITEMS.id: ITEMS, SIG: SIGNALS}

    def type_mapper(self):
        from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes

        return MySqlTypeMapper(TypeModes())

    def chunk_source(self):
        raise AssertionError("no chunk is read here")

    def position_watermarks(self):
        raise TidemarkError("no GTIDs")

    def partitions(self, table):
        return (None,)


def test_a_lost_position_is_marked_only_under_when_needed(tmp_path):
    lost = PositionLostError("the binlog was purged")
    marked = start_again(config(tmp_path, "snapshot.mode: when_needed\n"), dict(COMMITTED), lost)
    assert marked is not None and marked["source"] == COMMITTED["source"]
    assert marked[POSITION_LOST]["reason"] == "the binlog was purged"
    assert lost_position(marked) == COMMITTED["source"] and lost_position(COMMITTED) is None
    assert start_again(config(tmp_path, "snapshot.mode: initial\n"), dict(COMMITTED), lost) is None
    when_needed = config(tmp_path, "snapshot.mode: when_needed\n")
    assert start_again(when_needed, dict(COMMITTED), SourceUnavailableError("away")) is None
    assert start_again(when_needed, None, lost) is None  # a first start has no position to lose
    assert start_again(when_needed, marked, lost) is None  # lost again at once: it stops


def test_a_marked_offset_opens_the_source_as_a_first_start_above_the_lost_position(tmp_path):
    marked = {**COMMITTED, POSITION_LOST: {"reason": "purged", "at_ms": 1}}
    source = Source()
    open_source(source, marked)
    assert source.opened == ("after loss", COMMITTED["source"])
    open_source(source, COMMITTED)
    assert source.opened == ("open", COMMITTED)
    assert session_resume(marked) is None and session_resume(COMMITTED) is COMMITTED


def test_after_a_lost_position_every_captured_table_is_snapshotted_again(tmp_path):
    """Running snapshots are abandoned (their windows' log is gone); signals acted on,
    finished snapshots, refusals and channel positions are kept."""
    cfg = config(tmp_path, "snapshot.mode: when_needed\n")
    running = Snapshot("old", "sig-1", "incremental", (TableProgress("shop.orders", ("id",)),), 10)
    context = SnapshotContext(
        (running,),
        ("sig-1",),
        ({"id": "x", "kind": "initial"},),
        channels={"file": 7},
        captured=("shop.orders",),
    )
    marked = {**COMMITTED, "snapshot": context.to_json(), POSITION_LOST: {"reason": "purged", "at_ms": 1}}
    stage = snapshot_stage(cfg, Source(), marked, StateLayout(cfg))
    (again,) = stage.context.snapshots
    assert again.kind == "when_needed" and [t.table for t in again.tables] == ["shop.items", "shop.orders"]
    assert stage.context.signals == ("sig-1",) and stage.context.channels == {"file": 7}
    assert stage.context.finished == context.finished
    assert stage.context.captured == ("shop.items", "shop.orders")
    # a start from an unmarked offset snapshots only tables new to the capture list
    stage = snapshot_stage(cfg, Source(), {**COMMITTED, "snapshot": context.to_json()}, StateLayout(cfg))
    assert [(s.kind, [t.table for t in s.tables]) for s in stage.context.snapshots] == [
        ("incremental", ["shop.orders"]),
        ("new-tables", ["shop.items"]),
    ]


def test_a_snapshot_of_every_captured_table_leaves_the_signal_table_out(tmp_path):
    """Where the include list names it too (a MongoDB signal collection in the captured
    database), its rows are signals: snapshotting it would fail for ever (no key)."""
    cfg = config(tmp_path, "snapshot.mode: initial\ntable.include.list: .*\n")
    stage = snapshot_stage(cfg, Source(), None, StateLayout(cfg))
    assert [t.table for t in stage.context.active().tables] == ["shop.items", "shop.orders"]


class Connector:
    def __init__(self, in_log, done=True):
        self.initial_snapshot_in_log = in_log
        self.done = done

    def initial_snapshot_done(self, position):
        return self.done


def test_initial_only_stops_once_no_snapshot_runs_between_transactions(tmp_path):
    cfg = config(tmp_path, "snapshot.mode: initial_only\n")
    stage = snapshot_stage(cfg, Source(), None, StateLayout(cfg))
    assert stage.context.active().kind == "initial"
    assert not initial_only_done(cfg, Connector(False), stage, None)
    stage.context = SnapshotContext()
    stage._in_txn = True
    assert not initial_only_done(cfg, Connector(False), stage, None)
    stage._in_txn = False
    assert initial_only_done(cfg, Connector(False), stage, None)
    # a log reader's own initial snapshot (Vitess's copy phase) must be past too
    assert not initial_only_done(cfg, Connector(True, done=False), stage, COMMITTED)
    assert not initial_only_done(cfg, Connector(True), stage, None)
    assert initial_only_done(cfg, Connector(True), stage, COMMITTED)
    assert not initial_only_done(config(tmp_path, "snapshot.mode: initial\n"), Connector(False), stage, None)


OVERRIDES = "snapshot.select.statement.overrides"


def signal(id_, type_, data):
    source = {"file": "f", "pos": 1, "snapshot": "false", "db": "x", "table": "y", "row": 0}
    return RowChange(SIGNALS, "c", None, (id_, type_, orjson.dumps(data).decode()), source, 1)


def test_overrides_filter_the_initial_snapshot_not_a_signalled_incremental_one(tmp_path):
    cfg = config(
        tmp_path,
        f"snapshot.mode: initial\n{OVERRIDES}: shop.orders\n"
        f"{OVERRIDES}.shop.orders: SELECT * FROM shop.orders WHERE status = 'paid'\n",
    )
    stage = snapshot_stage(cfg, Source(), None, StateLayout(cfg))
    conditions = {t.table: t.condition for t in stage.context.active().tables}
    assert conditions == {"shop.items": None, "shop.orders": "status = 'paid'"}
    stage.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    signalled = stage.context.find("sig-1")
    assert signalled.tables[0].condition is None
    with pytest.raises(TidemarkError, match=f"{OVERRIDES}.shop.orders: unknown column 'colour'"):
        bad = config(tmp_path, f"{OVERRIDES}: shop.orders\n{OVERRIDES}.shop.orders: colour = 'red'\n")
        snapshot_stage(bad, Source(), None, StateLayout(bad))


class Chunks:
    """A blocking snapshot's chunk reads: which filter each came with."""

    def __init__(self):
        self.conditions = []

    def next_boundary(self, plan, lo, size):
        return None

    def read_chunk(self, plan, lo, hi):
        self.conditions.append(plan.condition)
        return [(1, "paid")]

    def close(self):
        pass


def test_a_blocking_snapshot_reads_with_the_override_unless_the_signal_filters(tmp_path):
    from cdc_core.signals.conditions import Compare

    chunks = Chunks()
    stage = SnapshotStage(
        SnapshotContext(),
        {ORDERS.id: ORDERS, SIG: SIGNALS},
        lambda t: t.database == "shop",
        SIG,
        LocalStaging(tmp_path),
        chunk_size=10,
        key_value=MYSQL_KEYS,
        open_chunk_source=lambda: chunks,
        overrides={ORDERS.id: "status = 'paid'"},
    )
    stage.process(
        [signal("b-1", "execute-snapshot", {"data-collections": ["shop.orders"], "type": "blocking"})]
    )
    while stage.busy():  # as the streamer drains it, the log waiting
        stage.drain()
    filtered = {"data-collection": "shop.orders", "filter": "id > 5"}
    stage.process(
        [
            signal(
                "b-2",
                "execute-snapshot",
                {
                    "data-collections": ["shop.orders"],
                    "type": "blocking",
                    "additional-conditions": [filtered],
                },
            )
        ]
    )
    assert chunks.conditions == [Compare("status", "=", "paid"), Compare("id", ">", 5)]


@pytest.mark.parametrize(
    ("now", "gtid_mode", "refused"),
    [("bin.000002", False, True), ("bin.000009", False, False), ("bin.000002", True, False)],
)
def test_mysql_without_gtids_starts_again_only_where_its_files_number_on(
    monkeypatch, now, gtid_mode, refused
):
    """Without GTIDs the order key's epoch is the binlog file's number: after a RESET
    MASTER (files numbered from 1 again) new events would order before delivered ones, so
    starting again is refused, before the schema history starts over. With GTIDs the
    epoch is carried in the positions and raised above the lost one's."""
    from cdc_core.connectors.mysql import binlog_source, server
    from cdc_core.connectors.mysql.binlog_source import BinlogSource

    source = BinlogSource.__new__(BinlogSource)
    source.info = server.ServerInfo("8.0", False, gtid_mode, 1)
    gtids = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9" if gtid_mode else None
    monkeypatch.setattr(
        binlog_source.server, "current_position", lambda ctl, info: server.LogPosition(now, 4, gtids)
    )
    lost = {"file": "bin.000003", "pos": 900, "epoch": 2}
    if refused:
        with pytest.raises(TidemarkError, match="numbered from bin.000002 now, below the lost position"):
            source._check_numbering(None, lost)
    else:
        source._check_numbering(None, lost)
