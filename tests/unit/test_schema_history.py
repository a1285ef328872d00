"""The schema timeline recovers the schema of any committed point from a checkpoint plus
the DDL after it, drops the unacknowledged tail, and refuses to guess when the history
does not reach the offsets."""

from __future__ import annotations

import pytest

from cdc_core.schema.history import SchemaHistory, SchemaHistoryError
from cdc_core.schema.model import Column, TableId, TableSchema

T = TableId("shop", "orders")
BASE = {T: TableSchema(T, (Column("id", "INT", nullable=False),), ("id",))}


def add_column(entry, tables):
    """A stand-in DDL applier: 'add <name>' appends an INT column to shop.orders."""
    applied.append(entry["seq"])
    name = entry["ddl"].split()[1]
    table = tables[T]
    return {**tables, T: TableSchema(T, (*table.columns, Column(name, "INT")), table.primary_key)}


applied: list[int] = []


@pytest.fixture(autouse=True)
def _reset():
    applied.clear()


def write_history(directory, n, interval):
    history = SchemaHistory(directory, checkpoint_interval=interval)
    history.start(BASE, {"gtids": "0-1-1"})
    tables = dict(BASE)
    for i in range(1, n + 1):
        history.append(f"add c{i}", "shop", {"gtids": f"0-1-{i + 1}"}, ts_ms=i)
        tables = add_column({"seq": i, "ddl": f"add c{i}"}, tables)
        history.maybe_checkpoint(tables, {"gtids": f"0-1-{i + 1}"})
    applied.clear()
    return history


def test_recovery_reads_the_newest_checkpoint_and_replays_only_the_tail(tmp_path):
    write_history(tmp_path, 25, interval=10)
    tables = SchemaHistory(tmp_path, checkpoint_interval=10).recover(25, add_column)
    assert tables[T].column_names == ("id", *(f"c{i}" for i in range(1, 26)))
    assert applied == [21, 22, 23, 24, 25]  # checkpoint after entry 20, then the tail


def test_entries_beyond_the_committed_offset_are_dropped(tmp_path):
    write_history(tmp_path, 12, interval=100)
    history = SchemaHistory(tmp_path)
    tables = history.recover(7, add_column)
    assert tables[T].column_names == ("id", *(f"c{i}" for i in range(1, 8)))
    assert [e["seq"] for e in history.entries()] == list(range(1, 8))
    # The next DDL the streamer re-reads gets the number the dropped one had.
    assert history.append("add again", "shop", {}, ts_ms=0) == 8


def test_a_torn_final_entry_is_ignored(tmp_path):
    write_history(tmp_path, 3, interval=100)
    with open(tmp_path / "ddl.jsonl", "ab") as f:
        f.write(b'{"seq":4,"ddl":"add c')
    assert SchemaHistory(tmp_path).recover(3, add_column)[T].column_names[-1] == "c3"


def test_missing_history_is_a_clear_error_not_a_guess(tmp_path):
    write_history(tmp_path, 3, interval=100)
    (tmp_path / "ddl.jsonl").unlink()
    with pytest.raises(SchemaHistoryError, match="ends at entry 0 but the offsets need entry 3"):
        SchemaHistory(tmp_path).recover(3, add_column)
    for checkpoint in tmp_path.glob("checkpoint-*.json"):
        checkpoint.unlink()
    with pytest.raises(SchemaHistoryError, match="no schema checkpoint"):
        SchemaHistory(tmp_path).recover(3, add_column)


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    write_history(tmp_path, 50, interval=5)
    assert len(list(tmp_path.glob("checkpoint-*.json"))) == 3


def test_a_history_written_before_the_version_field_is_recovered_and_a_newer_one_refused(tmp_path):
    """Frozen files as Tidemark wrote them before checkpoints had a version (a column with
    MySQL attributes and a default, one DDL entry after the checkpoint)."""
    (tmp_path / "checkpoint-000000000000.json").write_text(
        '{"seq":0,"position":{"gtids":"0-1-1"},"tables":[{"database":"shop","table":"orders","columns":['
        '{"name":"id","type_name":"INT","nullable":false},{"name":"note","type_name":"VARCHAR","length":20,'
        '"charset":"utf8mb4","collation":"utf8mb4_general_ci","default":"n/a","has_default":true}],'
        '"primary_key":["id"],"charset":"utf8mb4"}]}'
    )
    (tmp_path / "ddl.jsonl").write_text(
        '{"seq":1,"ddl":"add c1","database":"shop","position":{"gtids":"0-1-2"},"ts_ms":1}\n'
    )
    tables = SchemaHistory(tmp_path).recover(1, add_column)
    note = tables[T].column("note")
    assert [c.name for c in tables[T].columns] == ["id", "note", "c1"] and applied == [1]
    assert (note.length, note.charset, note.default, note.has_default) == (20, "utf8mb4", "n/a", True)
    (tmp_path / "checkpoint-000000000000.json").write_text('{"version":2,"seq":0,"position":{},"tables":[]}')
    with pytest.raises(SchemaHistoryError, match="format version 2, newer than this Tidemark reads"):
        SchemaHistory(tmp_path).recover(1, add_column)
