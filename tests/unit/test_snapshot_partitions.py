"""Snapshots of a partitioned source (Vitess shards): each partition has a log of its own,
so a table is read in windows per partition, each between watermarks written into that
partition's log, and released rows carry the order of that log. Nothing here knows a
connector: an in-memory source with two partitions stands in for one."""

from __future__ import annotations

import time

import orjson

from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.snapshot.context import SnapshotContext, TableProgress
from cdc_core.snapshot.coordinator import ChunkCoordinator
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.source import RowChange, TransactionBegin, TransactionCommit

T = TableId("ks", "items")
SIG = TableId("ks", "debezium_signal")
SCHEMA = TableSchema(T, (Column("k", "INT", nullable=False), Column("v", "INT")), ("k",))
SIGNALS = TableSchema(
    SIG, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)
PARTS = ("-80", "80-")


class ShardedMemorySource:
    """Two partitions, each with its rows and its own log of watermark rows."""

    def __init__(self, rows: dict[str, list[tuple[int, int]]]) -> None:
        self.rows = rows
        self.logs: dict[str | None, list[RowChange]] = {p: [] for p in (*PARTS, None)}

    def partitions(self, table):
        return PARTS

    def _rows(self, plan, lo, hi):
        assert plan.partition in PARTS, "a window read without its partition"
        return [
            r
            for r in self.rows[plan.partition]
            if (lo is None or r[0] > lo[0]) and (hi is None or r[0] <= hi[0])
        ]

    def next_boundary(self, plan, lo, size):
        keys = [r[0] for r in self._rows(plan, lo, None)]
        return (keys[size - 1],) if len(keys) >= size else None

    def read_chunk(self, plan, lo, hi):
        return self._rows(plan, lo, hi)

    def write_watermark(self, kind, signal_id, data, partition=None):
        self.logs[partition].append(signal(signal_id, kind, data, partition))

    def exact_key_order(self, plan):
        return True

    def position_marker(self):
        return ""

    def close(self):
        pass


def signal(id_, type_, data, shard=None):
    source = {"shard": shard, "snapshot": "false"}
    return RowChange(SIGNALS, "c", None, (id_, type_, orjson.dumps(data).decode()), source, 1)


def in_txn(shard: str, items: list) -> list:
    """Items of one transaction of `shard`'s log, as a connector yields them."""
    begin = TransactionBegin(f"{shard}-txn", 0, 1, 1, {"shard": shard})
    return [begin, *items, TransactionCommit({"shard": shard}, 1)]


def stage(tmp_path) -> SnapshotStage:
    return SnapshotStage(
        SnapshotContext(),
        {T: SCHEMA, SIG: SIGNALS},
        lambda t: t == T,
        SIG,
        LocalStaging(tmp_path / "staging"),
        chunk_size=2,
        key_value=lambda _c: lambda v: v,
        partitions=lambda _t: PARTS,
    )


def released(out) -> list[tuple]:
    return [(i.after, i.source.get("shard")) for i in out if isinstance(i, RowChange) and i.op == "r"]


def test_each_partition_is_read_in_windows_of_its_own_with_watermarks_in_its_own_log(tmp_path):
    s = stage(tmp_path)
    s.process([signal("sig-1", "execute-snapshot", {"data-collections": ["ks.items"]})])
    entries = s.context.active().tables
    assert [(t.table, t.partition, t.label) for t in entries] == [
        ("ks.items", "-80", "ks.items@-80"),
        ("ks.items", "80-", "ks.items@80-"),
    ]
    source = ShardedMemorySource({"-80": [(1, 10), (5, 50), (9, 90)], "80-": [(2, 20), (7, 70)]})
    coordinator = ChunkCoordinator(s, lambda: source, lambda _t: SCHEMA)
    coordinator.start()
    out: list = []
    try:
        deadline = time.monotonic() + 20
        while s.context.active() is not None and time.monotonic() < deadline:
            for shard in PARTS:
                pending, source.logs[shard][:] = list(source.logs[shard]), []
                for row in pending:
                    # a change to key 5 in -80 lands inside its window: its staged row is dropped
                    inside = []
                    opens_first = (
                        row.after[1] == "snapshot-window-open" and orjson.loads(row.after[2])["lo"] is None
                    )
                    if shard == "-80" and opens_first:
                        inside = [RowChange(SCHEMA, "u", (5, 50), (5, 55), {"shard": shard}, 1)]
                    out += s.process(in_txn(shard, [row, *inside]))
            time.sleep(0.02)
    finally:
        coordinator.stop()
    assert source.logs[None] == [], "a window's watermark went to no partition's log"
    rows = released(out)
    # every row released once, in a transaction of its own partition's log (its order key)
    assert sorted(rows) == [((1, 10), "-80"), ((2, 20), "80-"), ((7, 70), "80-"), ((9, 90), "-80")]
    (finished,) = s.context.finished
    assert [(t["partition"], t["rows_released"], t["rows_dropped"]) for t in finished["tables"]] == [
        ("-80", 2, 1),
        ("80-", 2, 0),
    ]


def test_a_blocking_snapshot_of_a_partitioned_source_is_refused_with_the_reason(tmp_path):
    s = stage(tmp_path)
    data = {"data-collections": ["ks.items"], "type": "blocking"}
    s.process([signal("sig-b", "execute-snapshot", data)])
    assert s.context.active() is None
    (refused,) = s.context.refused
    assert "partitions with logs of their own" in refused["reason"]


def test_progress_entries_keep_their_partition_and_older_state_reads_without_one():
    entry = TableProgress("ks.items", ("k",), partition="80-", windows_done=3)
    assert TableProgress.from_json(entry.to_json()) == entry
    older = {"table": "db.t", "key": ["id"], "lo": None, "done": False}  # as written before partitions
    assert TableProgress.from_json(older).partition is None
    assert "partition" not in TableProgress("db.t", ("id",)).to_json()  # one-log sources: format unchanged
