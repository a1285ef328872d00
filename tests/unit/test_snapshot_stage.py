"""The snapshot stage in log order: signals change the state, watermarks open and close
windows, HW releases staged rows minus keys changed inside the window, and every state
change is marked where it happened (so offsets carry the state of their own position)."""

from __future__ import annotations

from dataclasses import replace

import orjson

from cdc_core.connectors.mysql.key_values import key_value as MYSQL_KEYS
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.keycodec import encode_key
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.snapshot.windows import Window
from cdc_core.source import RowChange, StateChange, TransactionBegin, TransactionCommit

T = TableId("shop", "orders")
ORDERS = TableSchema(T, (Column("id", "INT", nullable=False), Column("v", "INT")), ("id",))
SIG = TableId("tidemark", "debezium_signal")
SIGNALS = TableSchema(
    SIG, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
SOURCE = {"file": "f", "pos": 1, "snapshot": "false", "db": "x", "table": "y", "row": 0}


def stage(tmp_path, context=None):
    return SnapshotStage(
        context or SnapshotContext(),
        {T: ORDERS, SIG: SIGNALS},
        lambda t: t.database == "shop",
        SIG,
        LocalStaging(tmp_path),
        chunk_size=10,
        key_value=MYSQL_KEYS,
    )


def signal(id_, type_, data):
    return RowChange(SIGNALS, "c", None, (id_, type_, orjson.dumps(data).decode()), dict(SOURCE), 1)


def change(op, before, after):
    return RowChange(ORDERS, op, before, after, dict(SOURCE), 1)


def open_window(s, lo, hi, window="W.1"):
    snapshot_id = s.context.active().id
    return signal(
        f"{window}-open",
        "snapshot-window-open",
        {
            "snapshot": snapshot_id,
            "window": window,
            "table": "shop.orders",
            "key": ["id"],
            "lo": encode_key(lo),
            "hi": encode_key(hi),
            "exact": True,
        },
    )


def close_window(window="W.1"):
    return signal(
        f"{window}-close",
        "snapshot-window-close",
        {"snapshot": "?", "window": window, "columns": ["id", "v"], "rows": 3},
    )


def test_a_window_releases_its_staged_rows_minus_changed_keys_at_hw(tmp_path):
    s = stage(tmp_path)
    out = s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    assert [type(i) for i in out] == [StateChange]
    assert s.context.active().tables[0].key == ("id",)
    s.staging.write("W.1", [(1, 10), (2, 20), (3, 30)])
    hw_txn = [TransactionBegin("gtid-9", 0, 9, 1, {}), close_window(), TransactionCommit({}, 1)]
    out = s.process(
        [open_window(s, None, (3,)), change("u", (2, 20), (2, 21)), change("c", None, (50, 0)), *hw_txn]
    )
    reads = [i for i in out if isinstance(i, RowChange) and i.op == "r"]
    assert [r.after for r in reads] == [
        (1, 10),
        (3, 30),
    ]  # row 2 changed inside the window: the stream has it
    assert all(r.source["snapshot"] == "incremental" and r.source["table"] == "orders" for r in reads)
    kinds = [type(i).__name__ for i in out]
    # the reads sit inside the HW's transaction, and the state change right after them
    assert kinds == [
        "RowChange",
        "RowChange",
        "TransactionBegin",
        "RowChange",
        "RowChange",
        "StateChange",
        "TransactionCommit",
    ]
    state = out[5].snapshot
    assert state["released"] == 1
    table = state["snapshots"][0]["tables"][0]
    assert (table["lo"], table["rows_released"], table["rows_dropped"], table["done"]) == ([3], 2, 1, False)
    # The last window runs to the end of the table and finishes the snapshot.
    s.staging.write("W.2", [(50, 0)])
    out = s.process([open_window(s, (3,), None, "W.2"), close_window("W.2")])
    assert [i.after for i in out if isinstance(i, RowChange)] == [(50, 0)]
    assert s.context.active() is None
    assert s.context.finished[0]["signal_id"] == "sig-1"


def test_a_hw_without_its_lw_releases_nothing(tmp_path):
    """After a restart between LW and HW the recorded keys are gone: the chunk is re-read."""
    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    s.staging.write("W.1", [(1, 10)])
    out = s.process([close_window()])
    assert out == []
    assert s.window_passed("W.1")
    assert s.context.active().tables[0].windows_done == 0


def test_replayed_signals_are_not_acted_on_twice(tmp_path):
    s = stage(tmp_path)
    execute = signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})
    s.process([execute])
    resumed = stage(tmp_path, SnapshotContext.from_json(s.context.to_json()))
    assert resumed.process([execute]) == []
    assert len(resumed.context.snapshots) == 1


def test_a_condition_naming_none_of_the_tables_refuses_the_signal(tmp_path):
    """A misspelt data-collection would leave the filter unused and read the table whole."""
    s = stage(tmp_path)
    misspelt = {"data-collection": "shop\\.order", "filter": "id > 5"}
    s.process(
        [
            signal(
                "sig-1",
                "execute-snapshot",
                {"data-collections": ["shop.orders"], "additional-conditions": [misspelt]},
            )
        ]
    )
    assert s.context.active() is None
    assert (
        "'shop\\\\.order' matches none of the tables to snapshot (shop.orders)"
        in s.context.refused[-1]["reason"]
    )


def test_pause_resume_and_stop(tmp_path):
    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    s.process([signal("p", "pause-snapshot", {})])
    assert s.context.active().paused
    s.process([signal("r", "resume-snapshot", {})])
    assert not s.context.active().paused
    s.process([open_window(s, None, None)])
    assert len(s.tracker) == 1
    s.process([signal("s", "stop-snapshot", {"type": "incremental"})])
    assert s.context.active() is None and len(s.tracker) == 0
    s.process([signal("p2", "pause-snapshot", {})])
    refused = s.context.refused[-1]
    assert refused["id"] == "p2" and "no incremental snapshot" in refused["reason"] and refused["at_ms"]
    # Kept in the state every offset carries, so a restarted streamer still shows it.
    assert SnapshotContext.from_json(s.context.to_json()).refused[-1] == refused
    assert s.progress()["failed_signals"][-1] == refused


def test_a_schema_change_inside_a_window_discards_it(tmp_path):
    from cdc_core.source import SchemaChange

    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    s.staging.write("W.1", [(1, 10)])
    wider = TableSchema(T, (*ORDERS.columns, Column("extra", "INT")), ("id",))
    alter = SchemaChange(
        "ALTER TABLE orders ADD extra INT", "shop", "alter_table", (T,), (wider,), {}, {}, 1, 1
    )
    out = s.process([open_window(s, None, None), alter, close_window()])
    assert [i for i in out if isinstance(i, RowChange)] == []
    assert s.context.active().tables[0].windows_done == 0


def test_a_truncate_inside_a_window_releases_none_of_its_rows_and_reads_it_again(tmp_path):
    """A TRUNCATE changes every key at once: rows the chunk read before it are gone, so the
    window releases none of them (a truncate has no key to record) and is read again."""
    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    s.staging.write("W.1", [(1, 10), (2, 20)])
    out = s.process([open_window(s, None, None), change("t", None, None), close_window()])
    assert [i.op for i in out if isinstance(i, RowChange)] == ["t"]
    table = s.context.active().tables[0]
    assert table.windows_done == 0 and table.lo is None  # the same range, read again


class Positions:
    """Read-only mode's position helpers over plain integer positions."""

    def passed(self, position, marker):
        return position["pos"] >= int(marker)

    def order(self, position):
        return 0, position["pos"]

    def source_block(self, position, table, ts_ms):
        return {**SOURCE, "pos": position["pos"]}


def read_only_stage(tmp_path, context=None, committed=None, synthetic=None):
    """A (re)started read-only stage at the committed offset's position `committed`
    (None: the first start), inside the release `synthetic` if the offset was."""
    s = stage(tmp_path, context)
    s.positions = Positions()
    s.resume_releases(committed, synthetic, read_only=True)
    return s


def released_rows(items):
    return [i.after for i in items if isinstance(i, RowChange) and i.op == "r"]


def commit(pos):
    return TransactionCommit({"pos": pos}, 1)


def read_only_window(tmp_path, signal_id, rows, hi=None):
    """A first-started read-only stage running a snapshot, with one window (`(None, hi]`)
    opened, its chunk `rows` staged and its HW position 5 handed over."""
    s = read_only_stage(tmp_path)
    s.process([signal(signal_id, "execute-snapshot", {"data-collections": ["shop.orders"]})])
    snapshot_id = s.context.active().id
    window = Window(f"{snapshot_id}.{signal_id}", snapshot_id, T, None, hi, True, ("id",))
    s.submit_window(window)
    s.staging.write(window.id, rows)
    s.submit_high_watermark(window.id, "5", ("id", "v"))
    return s, window


def test_a_read_only_release_after_a_restart_is_the_same_transaction_with_the_same_rows(tmp_path):
    s, window = read_only_window(tmp_path, "sig-1", [(1, 10), (2, 20)])
    before_release = s.context.to_json()  # the last committed state: the release not yet in it
    first = s.process([commit(4), change("u", (2, 20), (2, 21)), commit(6)])
    released = [i for i in first if isinstance(i, RowChange) and i.op == "r"]
    assert [r.after for r in released] == [(1, 10)]
    begin = next(i for i in first if isinstance(i, TransactionBegin))

    # kill -9 before the offset with the release was committed: the log is read again from
    # before the HW position and passes it at the same point.
    again = read_only_stage(tmp_path, SnapshotContext.from_json(before_release), {"pos": 3})
    second = again.process([commit(4), commit(6)])
    assert [r.after for r in second if isinstance(r, RowChange) and r.op == "r"] == [(1, 10)]
    assert next(i for i in second if isinstance(i, TransactionBegin)) == begin

    # or it died inside the release: the synthetic transaction is replayed first, identically.
    inside = read_only_stage(tmp_path, SnapshotContext.from_json(before_release), {"pos": 6}, window.id)
    replayed = inside.process([])
    assert released_rows(replayed) == [(1, 10)]
    assert next(i for i in replayed if isinstance(i, TransactionBegin)) == begin
    # and only then: the log read on from the release's position does not release it again.
    assert released_rows(inside.process([commit(7)])) == []


def test_a_read_only_release_decided_by_a_killed_run_is_never_made_after_its_point(tmp_path):
    """A run reads a range, decides its release at its HW position, and is killed before
    that is committed. If a later offset is committed past that position with the range
    still to read (another run got there without the decision), the decision is dropped:
    made now, its rows (read back then) would take an order key later than a change made
    to them since. The range is read again instead. A read-only window that was open at
    a commit is not reopened by a restart either: its chunk is read again, under a new
    window, and the old one would record keys forever."""
    s, window = read_only_window(tmp_path, "sig-1", [(1, 10), (2, 20)])
    s.process([commit(4)])
    s.before_commit()  # an offset committed while the window was open
    unreleased = s.context.to_json()
    assert released_rows(s.process([commit(6)])) == [(1, 10), (2, 20)]  # decided, then killed
    s.staging.write(f"{window.snapshot_id}.9", [(3, 30)])  # and a chunk staged with no release yet

    # Committed at 9 by a run that had not read the range yet: the log has passed 5.
    later = read_only_stage(tmp_path, SnapshotContext.from_json(unreleased), {"pos": 9})
    assert len(later.tracker) == 0
    assert released_rows(later.process([change("d", (2, 20), None), commit(10), commit(11)])) == []
    assert later.staging.windows() == []
    assert later.context.active().tables[0].lo is None  # the range is still to be read

    # Committed before 5: the log passes the HW again, and the same rows go out again.
    s, window = read_only_window(tmp_path, "sig-2", [(1, 10)], hi=(5,))
    unreleased = s.context.to_json()
    assert released_rows(s.process([commit(6)])) == [(1, 10)]
    # Another killed run decided the same range again, later: only the first is made.
    decided = s.staging.read_release(window.id)
    again = replace(window, id=f"{window.snapshot_id}.3")
    s.staging.write_release(again.id, replace(decided, window=again, marker="7"))
    earlier = read_only_stage(tmp_path, SnapshotContext.from_json(unreleased), {"pos": 3})
    assert released_rows(earlier.process([commit(6)])) == [(1, 10)]
    assert released_rows(earlier.process([commit(8)])) == []
    assert earlier.staging.read_release(again.id) is None


def test_a_read_only_window_opens_between_transactions_at_the_position_passed_last(tmp_path):
    """The chunk is read once the database shows everything up to the window's opening
    position (`opened_at`), so the window opens only where the log is between
    transactions: a transaction whose first rows had passed unrecorded has then been
    shown too, and every change after it is recorded."""
    s = read_only_stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    snapshot_id = s.context.active().id
    s.process([TransactionBegin("t1", 0, 1, 1, {"pos": 1}), change("u", (1, 10), (1, 11))])
    window = Window(f"{snapshot_id}.1", snapshot_id, T, None, None, True, ("id",))
    s.submit_window(window)
    s.process([change("u", (2, 20), (2, 21))])
    assert not s.window_open(window.id)  # inside the transaction
    s.process([change("u", (3, 30), (3, 31)), commit(4), TransactionBegin("t2", 0, 5, 1, {"pos": 4})])
    assert s.window_open(window.id) and s.opened_at(window.id) == {"pos": 4}
    s.process([change("u", (5, 50), (5, 51)), commit(6)])
    assert s.tracker.windows_of(T)[0].recorded == {(5,)}

    between = read_only_stage(tmp_path / "between")
    between.process([signal("sig-2", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    between.process([commit(7)])
    second = Window(
        f"{between.context.active().id}.2", between.context.active().id, T, None, None, True, ("id",)
    )
    between.submit_window(second)
    between.process([])
    assert between.window_open(second.id) and between.opened_at(second.id) == {"pos": 7}


def test_a_restart_keeps_the_staged_chunk_of_a_window_whose_watermarks_are_in_the_log(tmp_path):
    """With watermark rows (not read-only), a chunk staged before a kill is released from
    its staged rows when the log gives its HW again, even where the connector has log
    positions (GTIDs) for other uses."""
    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["shop.orders"]})])
    context, window = s.context.to_json(), f"{s.context.active().id}.1"
    s.process([open_window(s, None, None, window)])
    s.staging.write(window, [(1, 10), (2, 20)])  # staged, its HW written; then killed

    again = stage(tmp_path, SnapshotContext.from_json(context))
    again.positions = Positions()
    again.resume_releases({"pos": 9}, None, read_only=False)
    out = again.process([open_window(again, None, None, window), close_window(window)])
    assert released_rows(out) == [(1, 10), (2, 20)]


def test_the_read_only_releases_a_killed_run_decided_come_again_in_their_order(tmp_path):
    """A run released two ranges in turn and was killed before committing either. Its
    successor, resumed before both HW positions, makes both releases again where the log
    passes them, the second once the first moved the table's progress to it: the rows
    delivered before the kill are delivered again, not read anew (which would release
    each of them a second time)."""
    s, first = read_only_window(tmp_path, "sig-1", [(1, 10)], hi=(5,))
    unreleased = s.context.to_json()
    assert released_rows(s.process([commit(6)])) == [(1, 10)]
    second = Window(f"{first.snapshot_id}.2", first.snapshot_id, T, (5,), None, True, ("id",))
    s.submit_window(second)
    s.staging.write(second.id, [(7, 70)])
    s.submit_high_watermark(second.id, "7", ("id", "v"))
    assert released_rows(s.process([commit(8)])) == [(7, 70)]

    again = read_only_stage(tmp_path, SnapshotContext.from_json(unreleased), {"pos": 3})
    assert released_rows(again.process([commit(6)])) == [(1, 10)]
    assert released_rows(again.process([commit(8)])) == [(7, 70)]
    assert again.context.active() is None  # both ranges released: the snapshot is done
