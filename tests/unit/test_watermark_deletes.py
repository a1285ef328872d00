"""`incremental.snapshot.watermarking.strategy: insert_delete`: a window's open row is
deleted at its close instead of a close row being inserted, so the signal table does not
grow. The delete is the window's high watermark; what a close row carried comes from the
window's close note. A delete carrying only the row's id (a MongoDB delete event without
a pre-image) is enough. A streamer restarted between the LW and the delete still releases
the window; a delete replayed after the window's release was committed releases nothing."""

from __future__ import annotations

import time

import orjson

from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.signals.actions import WINDOW_CLOSE, WINDOW_OPEN
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.coordinator import ChunkCoordinator
from cdc_core.snapshot.keycodec import encode_key
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging, write_parquet
from cdc_core.snapshot.window_notes import WindowNote, read_note, write_note
from cdc_core.source import RowChange

T = TableId("shop", "orders")
ORDERS = TableSchema(T, (Column("id", "INT", nullable=False), Column("v", "INT")), ("id",))
SIG = TableId("tidemark", "debezium_signal")
SIGNALS = TableSchema(
    SIG, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
SOURCE = {"file": "f", "pos": 1, "snapshot": "false", "db": "shop", "table": "x", "row": 0}


def stage(tmp_path, context=None) -> SnapshotStage:
    return SnapshotStage(
        context or SnapshotContext(),
        {T: ORDERS, SIG: SIGNALS},
        lambda t: t.database == "shop",
        SIG,
        LocalStaging(tmp_path / "staging"),
        chunk_size=3,
        key_value=lambda column: lambda v: v,
    )


def signal(id_, type_, data):
    return RowChange(SIGNALS, "c", None, (id_, type_, orjson.dumps(data).decode()), dict(SOURCE), 1)


def deleted(id_):
    """The delete of a signal row as a MongoDB change stream shows it: the `_id` alone."""
    return RowChange(SIGNALS, "d", (id_, None, None), None, dict(SOURCE), 1)


def change(op, before, after):
    return RowChange(ORDERS, op, before, after, dict(SOURCE), 1)


def reads(items):
    return [i.after for i in items if isinstance(i, RowChange) and i.op == "r"]


def start(s, data=None) -> str:
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"], **(data or {})})])
    return s.context.active().id


def open_row(snapshot, window, note, lo=None, hi=None, **extra):
    data = {"snapshot": snapshot, "window": window, "table": "shop.orders", "key": ["id"]}
    data.update(lo=encode_key(lo), hi=encode_key(hi), exact=True, **extra)
    if note is not None:
        data.update(closed_by="delete", note=note)
    return signal(f"{window}-open", WINDOW_OPEN, data)


class MemorySource:
    """A chunk source whose watermark writes and deletes go to a list (the log)."""

    def __init__(self, rows):
        self.rows = rows
        self.log = []
        self.table = {}  # the signal table: id -> type

    def partitions(self, table):
        return (None,)

    def next_boundary(self, plan, lo, size):
        keys = [r[0] for r in self.rows if lo is None or r[0] > lo[0]]
        return (keys[size - 1],) if len(keys) >= size else None

    def read_chunk(self, plan, lo, hi):
        return [r for r in self.rows if (lo is None or r[0] > lo[0]) and (hi is None or r[0] <= hi[0])]

    def write_watermark(self, kind, signal_id, data, partition=None):
        self.table[signal_id] = kind
        self.log.append(signal(signal_id, kind, data))

    def delete_watermark(self, signal_id, partition=None):
        del self.table[signal_id]
        self.log.append(deleted(signal_id))

    def exact_key_order(self, plan):
        return True

    def position_marker(self):
        return ""

    def close(self):
        pass


def test_the_in_process_reader_closes_each_window_by_deleting_its_open_row(tmp_path):
    s = stage(tmp_path)
    start(s)
    source = MemorySource([(i, 0) for i in range(1, 9)])
    coordinator = ChunkCoordinator(s, lambda: source, lambda t: ORDERS, close_by_delete=True)
    coordinator.start()
    released, seen, changed = [], [], False
    try:
        deadline = time.monotonic() + 20
        while s.context.active() is not None and time.monotonic() < deadline:
            pending, source.log[:] = list(source.log), []
            seen += pending
            opens = [n for n, i in enumerate(pending) if i.after and i.after[1] == WINDOW_OPEN]
            if not changed and opens:  # right after the first window's LW: its read of 2 is dropped
                pending.insert(opens[0] + 1, change("u", (2, 0), (2, 5)))
                changed = True
            released += reads(s.process(pending))
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert s.context.active() is None, "the snapshot did not finish"
    assert sorted(released) == [(i, 0) for i in range(1, 9) if i != 2]
    assert not any(i.after and i.after[1] == WINDOW_CLOSE for i in seen), "a close row was written"
    opened = [i.after[0] for i in seen if i.op == "c"]
    assert len(opened) == 3 and [i.before[0] for i in seen if i.op == "d"] == opened
    assert source.table == {}, "the signal table grew"
    s.after_commit(s.context.to_json())  # the releases committed: staged rows and notes go
    assert s.staging.windows() == []


def test_a_streamer_restarted_between_the_lw_and_the_delete_releases_the_window(tmp_path):
    first = stage(tmp_path)
    snapshot = start(first)
    note = str(first.staging.note_path(f"{snapshot}.w1"))
    first.process([open_row(snapshot, f"{snapshot}.w1", note), change("u", (1, 0), (1, 7))])
    first.before_commit()  # the open window and its keys, on disk with the offset
    committed = first.context.to_json()
    first.staging.write(f"{snapshot}.w1", [(1, 0), (2, 0), (3, 0)])
    write_note(note, WindowNote(snapshot, f"{snapshot}.w1", ("id", "v"), 3))

    # kill -9; the log is read on from the committed offset, after the LW
    second = stage(tmp_path, SnapshotContext.from_json(committed))
    assert reads(second.process([deleted(f"{snapshot}.w1-open")])) == [(2, 0), (3, 0)]
    assert second.context.active() is None
    second.after_commit(second.context.to_json())

    # a delete replayed once that release is committed releases nothing
    third = stage(tmp_path, second.context)
    assert third.process([deleted(f"{snapshot}.w1-open")]) == []


def test_a_delete_replayed_before_its_release_was_committed_releases_the_same_rows(tmp_path):
    first = stage(tmp_path)
    snapshot = start(first)
    window = f"{snapshot}.w1"
    note = str(first.staging.note_path(window))
    first.process([open_row(snapshot, window, note)])
    first.before_commit()
    committed = first.context.to_json()
    first.staging.write(window, [(1, 0), (2, 0)])
    write_note(note, WindowNote(snapshot, window, ("id", "v"), 2))
    released = reads(first.process([change("d", (1, 0), None), deleted(f"{window}-open")]))
    assert released == [(2, 0)]
    # killed before the commit after the release: the log comes again from the LW's offset
    again = stage(tmp_path, SnapshotContext.from_json(committed))
    assert reads(again.process([deleted(f"{window}-open")])) == released


def test_the_delete_of_an_insert_insert_windows_open_row_is_not_its_high_watermark(tmp_path):
    s = stage(tmp_path)
    snapshot = start(s)
    window = f"{snapshot}.w1"
    s.staging.write(window, [(1, 0)])
    assert s.process([open_row(snapshot, window, None), deleted(f"{window}-open")]) == []
    assert len(s.tracker) == 1, "a purge of the signal table closed the window"
    close = signal(
        f"{window}-close", WINDOW_CLOSE, {"snapshot": snapshot, "window": window, "columns": ["id", "v"]}
    )
    assert reads(s.process([close])) == [(1, 0)]


def test_a_delete_without_its_note_reads_the_window_again(tmp_path):
    """The open row deleted before the reader wrote its note (by hand, mid-window): nothing
    is released from rows that may not be staged yet; the window is read again."""
    s = stage(tmp_path, None)
    snapshot = start(s)
    window = f"{snapshot}.w1"
    out = s.process(
        [open_row(snapshot, window, str(s.staging.note_path(window)), None, (3,)), deleted(f"{window}-open")]
    )
    assert reads(out) == []
    assert s.context.active().tables[0].lo is None and s.window_passed(window)

    planned = stage(tmp_path / "spark", None)
    snapshot = start(planned, {"tidemark.reader": "spark"})
    note = str(tmp_path / "nowhere" / "w2.close.json")
    planned.process([open_row(snapshot, "w2", note, None, (3,), index=0, of=2), deleted("w2-open")])
    (again,) = planned.context.active().tables[0].read_again
    assert (again.index, again.hi) == (0, (3,))


def test_a_spark_window_closed_by_delete_is_released_from_its_staged_file(tmp_path):
    """The chunk job's side: the open row names the note, which is written beside the
    staged file before the open row is deleted; the streamer reads the file it names."""
    from spark_jobs.snapshot_windows import close_window, open_window

    class Form:
        schema = ORDERS
        digest = None

    source = MemorySource([])
    s = stage(tmp_path)
    snapshot = start(s, {"tidemark.reader": "spark"})
    folder = str(tmp_path / "staged" / snapshot / "shop.orders")
    w = {"table": "shop.orders", "key": ["id"], "lo": None, "hi": None, "exact": True, "index": 0, "of": 1}
    window_id, note = open_window(source, snapshot, w, folder)
    assert note == f"{folder}/{window_id}.close.json"
    uri = f"{folder}/000000-{window_id}.parquet"
    write_parquet(uri, ["id", "v"], [(1, 0), (2, 0)])
    close_window(source, snapshot, window_id, Form(), 2, uri, None, note)
    assert read_note(note, window_id) == WindowNote(snapshot, window_id, ("id", "v"), 2, uri, None)
    assert source.table == {}
    assert reads(s.process(source.log)) == [(1, 0), (2, 0)]
    assert s.context.active() is None

    # insert_insert: no note, a close row
    window_id, note = open_window(source, snapshot, w)
    close_window(source, snapshot, window_id, Form(), 0, uri)
    assert note is None and source.table == {
        f"{window_id}-open": WINDOW_OPEN,
        f"{window_id}-close": WINDOW_CLOSE,
    }


def test_the_open_row_of_a_window_whose_reader_was_killed_is_deleted(tmp_path):
    """The in-process reader killed between a window's LW and its delete: after the
    restart the range is read again under a new window, and the old window's open row,
    which nobody else would delete, is deleted once that range is released."""
    first = stage(tmp_path)
    snapshot = start(first)
    old = f"{snapshot}.old"
    first.process([open_row(snapshot, old, str(first.staging.note_path(old)), None, (3,))])
    first.before_commit()
    committed = first.context.to_json()

    second = stage(tmp_path, SnapshotContext.from_json(committed))
    assert len(second.tracker) == 1
    source = MemorySource([(i, 0) for i in range(1, 6)])
    source.table[f"{old}-open"] = WINDOW_OPEN  # left in the signal table by the killed reader
    coordinator = ChunkCoordinator(second, lambda: source, lambda t: ORDERS, close_by_delete=True)
    coordinator.start()
    released = []
    try:
        deadline = time.monotonic() + 20
        while (second.context.active() is not None or source.table) and time.monotonic() < deadline:
            pending, source.log[:] = list(source.log), []
            released += reads(second.process(pending))
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert sorted(released) == [(i, 0) for i in range(1, 6)]
    assert source.table == {}, "the killed reader's open row stays in the signal table"
    assert len(second.tracker) == 0
