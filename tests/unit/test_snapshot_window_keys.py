"""Window keys in one canonical form, and windows that survive a streamer restart.

The binlog, a chunk read and a Spark-staged file give one stored key value in different
Python forms (BINARY without its trailing zero bytes, TIMESTAMP naive or aware, BIGINT
UNSIGNED as int or Decimal, TIME as timedelta or text, BIT as bits, bytes or int, ENUM
and SET as a member's index or bits, or text). A
change inside a window must drop the staged row of the same key whatever forms met.
A window whose LW was processed before a restart is released at its HW after it, with the
keys recorded before the restart; one that cannot be released is read again by the
streamer's own reader."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import orjson
import pytest

from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.coordinator import ChunkCoordinator
from cdc_core.snapshot.keycodec import encode_key
from cdc_core.snapshot.open_windows import OpenWindowFile
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging, write_parquet
from cdc_core.source import RowChange, SchemaChange

T = TableId("shop", "keyed")
SIG = TableId("tidemark", "debezium_signal")
SIGNALS = TableSchema(
    SIG, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
SOURCE = {"file": "f", "pos": 1, "snapshot": "false", "db": "x", "table": "y", "row": 0}
UTC = dt.UTC

# (key column, the binlog's value, the same stored value as Spark's staging reads it back)
FORMS = {
    "binary": (Column("k", "BINARY", 16, nullable=False), b"\x01\x02", b"\x01\x02" + bytes(14)),
    "timestamp": (
        Column("k", "TIMESTAMP", 6, nullable=False),
        dt.datetime(2024, 1, 2, 3, 4, 5, 6),
        dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    ),
    "bigint unsigned": (
        Column("k", "BIGINT", unsigned=True, nullable=False),
        2**64 - 2,
        Decimal(2**64 - 2),
    ),
    "time": (
        Column("k", "TIME", 6, nullable=False),
        dt.timedelta(microseconds=-1_250_000),
        "-00:00:01.250000",
    ),
    "bit": (Column("k", "BIT", 10, nullable=False), "1000000001", 513),
    "year": (Column("k", "YEAR", nullable=False), 2024, 2024),
    # the decoder gives a member's index or bits (its names, from the table map, may be lost)
    "enum": (Column("k", "ENUM", charset="latin1", enum_values=("lo", "ä"), nullable=False), 2, "ä"),
    "set": (Column("k", "SET", charset="latin1", enum_values=("a", "ö", "c"), nullable=False), 0b011, "a,ö"),
}


def table(key: Column) -> TableSchema:
    return TableSchema(T, (key, Column("v", "INT")), ("k",))


def stage(tmp_path, schema, context=None) -> SnapshotStage:
    return SnapshotStage(
        context or SnapshotContext(),
        {T: schema, SIG: SIGNALS},
        lambda t: t.database == "shop",
        SIG,
        LocalStaging(tmp_path / "staging"),
        chunk_size=10,
        key_value=MySqlTypeMapper(TypeModes()).key_value,
    )


def signal(id_, type_, data):
    return RowChange(SIGNALS, "c", None, (id_, type_, orjson.dumps(data).decode()), dict(SOURCE), 1)


def execute(s: SnapshotStage) -> str:
    data = {"data-collections": ["shop.keyed"], "tidemark.reader": "spark"}
    s.process([signal("sig-1", "execute-snapshot", data)])
    return s.context.active().signal_id


def lw(snapshot, window, lo=None, hi=None, index=0, of=1):
    return signal(
        f"{window}-open",
        "snapshot-window-open",
        {
            "snapshot": snapshot,
            "window": window,
            "table": "shop.keyed",
            "key": ["k"],
            "lo": encode_key(lo),
            "hi": encode_key(hi),
            "exact": True,
            "index": index,
            "of": of,
        },
    )


def hw(snapshot, window, staged, columns=("k", "v"), rows=2):
    data = {"snapshot": snapshot, "window": window, "columns": list(columns), "rows": rows, "staged": staged}
    return signal(f"{window}-close", "snapshot-window-close", data)


def reads(out):
    return [i.after for i in out if isinstance(i, RowChange) and i.op == "r"]


@pytest.mark.parametrize("form", FORMS)
def test_a_change_inside_a_window_drops_the_staged_row_whatever_form_each_reader_gave(tmp_path, form):
    key, logged, staged = FORMS[form]
    schema = table(key)
    s = stage(tmp_path, schema)
    snapshot = execute(s)
    uri = str(tmp_path / "w1.parquet")
    write_parquet(uri, ["k", "v"], [(staged, 1)])
    out = s.process(
        [
            lw(snapshot, "w1"),
            RowChange(schema, "d", (logged, 1), None, dict(SOURCE), 1),  # deleted inside the window
            hw(snapshot, "w1", uri, rows=1),
        ]
    )
    assert reads(out) == [], f"{form}: a row deleted inside its window was released"
    progress = s.context.finished[0]["tables"][0]
    assert (progress["rows_released"], progress["rows_dropped"]) == (0, 1)


def test_binary_keys_that_differ_only_in_trailing_zero_bytes_stay_apart(tmp_path):
    key = Column("k", "VARBINARY", 16, nullable=False)
    schema = table(key)
    s = stage(tmp_path, schema)
    snapshot = execute(s)
    uri = str(tmp_path / "w1.parquet")
    write_parquet(uri, ["k", "v"], [(b"\x01", 1), (b"\x01\x00", 2)])
    out = s.process(
        [
            lw(snapshot, "w1"),
            RowChange(schema, "d", (b"\x01", 1), None, dict(SOURCE), 1),
            hw(snapshot, "w1", uri),
        ]
    )
    assert reads(out) == [(b"\x01\x00", 2)]


def spark_window(tmp_path, s, schema, staged_rows):
    snapshot = execute(s)
    uri = str(tmp_path / "w1.parquet")
    write_parquet(uri, ["k", "v"], staged_rows)
    return snapshot, uri


def test_a_streamer_restarted_between_lw_and_hw_releases_the_window_with_the_keys_recorded_before(tmp_path):
    key, logged, staged = FORMS["binary"]
    schema = table(key)
    first = stage(tmp_path, schema)
    other = b"\x09" + bytes(15)
    snapshot, uri = spark_window(tmp_path, first, schema, [(staged, 1), (other, 2)])
    first.process([lw(snapshot, "w1"), RowChange(schema, "u", (logged, 1), (logged, 5), dict(SOURCE), 1)])
    first.before_commit()  # the offset committed here lies after the LW and the change
    committed = first.context.to_json()

    # kill -9; the log is read on from the committed offset: the HW, not the LW
    second = stage(tmp_path, schema, SnapshotContext.from_json(committed))
    assert len(second.tracker) == 1
    out = second.process([hw(snapshot, "w1", uri)])
    assert reads(out) == [(other, 2)], "the window was not released, or with a row changed inside it"
    assert second.context.active() is None and second.context.finished[0]["tables"][0]["done"]


def test_open_windows_are_saved_only_when_they_changed_and_stale_ones_are_forgotten(tmp_path):
    schema = table(FORMS["bit"][0])
    s = stage(tmp_path, schema)
    snapshot = execute(s)
    saved = OpenWindowFile(tmp_path / "staging")
    s.process([lw(snapshot, "killed-job", index=0, of=2)])  # a chunk job killed before this HW
    s.before_commit()
    mtime = saved.path.stat().st_mtime_ns
    s.before_commit()
    assert saved.path.stat().st_mtime_ns == mtime
    assert [w.id for w in saved.load()] == ["killed-job"]
    # The job's next run reads window 0 again and the streamer releases it.
    uri = str(tmp_path / "w0.parquet")
    write_parquet(uri, ["k", "v"], [(5, 1)])
    s.process([lw(snapshot, "rerun", index=0, of=2), hw(snapshot, "rerun", uri, rows=1)])
    assert len(s.tracker) == 0, "the killed job's window stays open for ever"
    s.before_commit()
    assert saved.load() == []
    # A late LW of a window already released does not open it either.
    s.process([lw(snapshot, "late", index=0, of=2)])
    assert len(s.tracker) == 0


def test_the_saved_windows_of_format_version_1_are_read(tmp_path):
    """A frozen file as version 1 writes it: an upgrade never loses an open window."""
    path = tmp_path / "open_windows.json"
    path.write_text(
        '{"version":1,"windows":[{"id":"w1","snapshot":"sig-1","table":"shop.keyed",'
        '"lo":[{"$b":"AQ=="}],"hi":null,"exact":true,"key":["k"],"index":3,"of":9,'
        '"schema_changed":false,"recorded":[[{"$b":"AQI="}],[{"$dt":"2024-01-02T03:04:05"}]]}]}'
    )
    (window,) = OpenWindowFile(tmp_path).load()
    assert (window.id, window.snapshot_id, window.table, window.index, window.of) == ("w1", "sig-1", T, 3, 9)
    assert window.lo == (b"\x01",) and window.hi is None and window.key_columns == ("k",)
    assert window.recorded == {(b"\x01\x02",), (dt.datetime(2024, 1, 2, 3, 4, 5),)}
    assert window.note is None  # written before insert_delete: closed by a close row
    path.write_text("{not json")
    assert OpenWindowFile(tmp_path).load() == []  # unreadable: its windows are read again


class MemorySource:
    """An in-memory chunk source whose watermark writes go to a list (the log)."""

    def __init__(self, rows):
        self.rows = rows  # sorted by key
        self.log = []

    def next_boundary(self, plan, lo, size):
        keys = [r[0] for r in self.rows if lo is None or r[0] > lo[0]]
        return (keys[size - 1],) if len(keys) >= size else None

    def read_chunk(self, plan, lo, hi):
        return [r for r in self.rows if (lo is None or r[0] > lo[0]) and (hi is None or r[0] <= hi[0])]

    def partitions(self, table):
        return (None,)

    def write_watermark(self, kind, signal_id, data, partition=None):
        self.log.append(signal(signal_id, kind, data))

    def exact_key_order(self, plan):
        return True

    def position_marker(self):
        return ""

    def close(self):
        pass


def test_a_planned_window_refused_at_its_hw_is_read_again_by_the_streamer(tmp_path):
    """The table changed inside a Spark window: its staged rows are stale in form, so the
    window is refused; the streamer queues it and its own reader reads it again."""
    schema = table(Column("k", "INT", nullable=False))
    s = stage(tmp_path, schema)
    snapshot = execute(s)
    uri = str(tmp_path / "w1.parquet")
    write_parquet(uri, ["k", "v"], [(1, 10), (2, 20)])
    wider = TableSchema(T, (*schema.columns, Column("extra", "INT")), ("k",))
    alter = SchemaChange(
        "ALTER TABLE keyed ADD extra INT", "shop", "alter_table", (T,), (wider,), {}, {}, 1, 1
    )
    out = s.process([lw(snapshot, "w1", None, (2,), 0, 2), alter, hw(snapshot, "w1", uri)])
    assert reads(out) == []
    (again,) = s.context.active().tables[0].read_again
    assert (again.index, again.lo, again.hi) == (0, None, (2,))
    assert s.progress()["running"][0]["tables"][0]["read_again"] == 1

    source = MemorySource([(1, 10, None), (2, 21, None), (3, 30, None)])
    coordinator = ChunkCoordinator(s, lambda: source, lambda t: wider)
    assert coordinator._next()[2] == again
    coordinator.start()
    released = []
    try:
        deadline = time.monotonic() + 20
        while s.context.active().tables[0].read_again and time.monotonic() < deadline:
            pending, source.log[:] = list(source.log), []
            released += reads(s.process(pending))
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert released == [(1, 10, None), (2, 21, None)]
    progress = s.context.active().tables[0]
    assert progress.done_windows == (0,) and progress.read_again == ()
    assert coordinator._next() is None  # window 1 is the chunk job's
