"""The schema timeline: every DDL statement the streamer saw, plus periodic checkpoints.

A binlog row event carries no usable schema of its own time, so the streamer must know
what each table looked like when the event was written (see seed 003: stop, ALTER in the
middle, restart). The history is an append-only list of DDL entries numbered from 1;
a checkpoint stores the full set of table schemas after entry N, so recovery reads the
newest checkpoint and replays only the entries after it — not months of DDL.

Each committed offset records the number of the last entry it includes (`schema_seq`).
Entries beyond it belong to an unacknowledged tail: recovery drops them, and the streamer
re-reads and re-appends them from the log, so the history can never be ahead of the
offsets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId, TableSchema

Tables = Mapping[TableId, TableSchema]
ApplyDdl = Callable[[dict[str, Any], Tables], Tables]

_KEEP_CHECKPOINTS = 3
# The checkpoint format (version 0: before the field existed, read the same way).
CHECKPOINT_VERSION = 1


class SchemaHistoryError(TidemarkError):
    """The stored schema history is missing or unreadable."""


class SchemaHistory:
    def __init__(self, directory: Path, checkpoint_interval: int = 100) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.checkpoint_interval = checkpoint_interval
        self.ddl_file = self.directory / "ddl.jsonl"
        self.last_seq = 0
        self._since_checkpoint = 0

    # ------------------------------------------------------------------ reading

    def exists(self) -> bool:
        return any(self.directory.glob("checkpoint-*.json"))

    def recover(self, upto_seq: int, apply: ApplyDdl) -> dict[TableId, TableSchema]:
        """The table schemas after entry `upto_seq`, dropping any later entries."""
        checkpoint_seq, tables = self._latest_checkpoint(upto_seq)
        entries = [e for e in self._entries() if e["seq"] <= upto_seq]
        if any(e["seq"] > upto_seq for e in self._entries()):
            self._rewrite(entries)
        for stale in self.directory.glob("checkpoint-*.json"):
            if int(stale.stem.split("-")[1]) > upto_seq:
                stale.unlink()
        current: Tables = tables
        for entry in entries:
            if entry["seq"] > checkpoint_seq:
                current = apply(entry, current)
        self.last_seq = entries[-1]["seq"] if entries else checkpoint_seq
        if self.last_seq != upto_seq:
            raise SchemaHistoryError(
                f"schema history in {self.directory} ends at entry {self.last_seq} but the offsets need entry "
                f"{upto_seq}; the history was removed or is from another connector. Remove the connector's "
                "offsets too to start over from the current schema (events in between are not re-read)."
            )
        self._since_checkpoint = self.last_seq - checkpoint_seq
        return dict(current)

    def _latest_checkpoint(self, upto_seq: int) -> tuple[int, dict[TableId, TableSchema]]:
        candidates = sorted(
            (int(p.stem.split("-")[1]), p)
            for p in self.directory.glob("checkpoint-*.json")
            if int(p.stem.split("-")[1]) <= upto_seq
        )
        if not candidates:
            raise SchemaHistoryError(
                f"no schema checkpoint at or before entry {upto_seq} in {self.directory}; the schema history was "
                "removed. Remove the connector's offsets too to start over from the current schema."
            )
        seq, path = candidates[-1]
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise SchemaHistoryError(f"unreadable schema checkpoint {path}: {exc}") from None
        if int(data.get("version", 0)) > CHECKPOINT_VERSION:
            raise SchemaHistoryError(
                f"schema checkpoint {path} has format version {data['version']}, newer than this Tidemark "
                f"reads ({CHECKPOINT_VERSION}): run the Tidemark version that wrote it, or a newer one"
            )
        tables = {t.id: t for t in (TableSchema.from_json(d) for d in data["tables"])}
        return seq, tables

    def _entries(self) -> list[dict[str, Any]]:
        if not self.ddl_file.exists():
            return []
        entries = []
        with open(self.ddl_file, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a torn final write: never acknowledged, so never needed
                entries.append(orjson.loads(line))
        return entries

    def entries(self) -> list[dict[str, Any]]:
        """Every stored DDL entry, oldest first."""
        return self._entries()

    # ------------------------------------------------------------------ writing

    def start(self, tables: Tables, position: dict[str, Any]) -> None:
        """Begin a new history from a schema snapshot (first start)."""
        for old in self.directory.glob("checkpoint-*.json"):
            old.unlink()
        self.ddl_file.unlink(missing_ok=True)
        self.last_seq = 0
        self.checkpoint(tables, position)

    def append(self, ddl: str, database: str | None, position: dict[str, Any], ts_ms: int) -> int:
        """Durably add a DDL entry; returns its number."""
        seq = self.last_seq + 1
        line = orjson.dumps(
            {"seq": seq, "ddl": ddl, "database": database, "position": position, "ts_ms": ts_ms}
        )
        fd = os.open(self.ddl_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        self.last_seq = seq
        self._since_checkpoint += 1
        return seq

    def maybe_checkpoint(self, tables: Tables, position: dict[str, Any]) -> None:
        if self._since_checkpoint >= self.checkpoint_interval:
            self.checkpoint(tables, position)

    def checkpoint(self, tables: Tables, position: dict[str, Any]) -> None:
        data = {
            "version": CHECKPOINT_VERSION,
            "seq": self.last_seq,
            "position": position,
            "tables": [t.to_json() for t in sorted(tables.values(), key=lambda t: t.id)],
        }
        _atomic_write(self.directory / f"checkpoint-{self.last_seq:012d}.json", orjson.dumps(data))
        self._since_checkpoint = 0
        checkpoints = sorted(self.directory.glob("checkpoint-*.json"))
        for old in checkpoints[:-_KEEP_CHECKPOINTS]:
            old.unlink()

    def _rewrite(self, entries: list[dict[str, Any]]) -> None:
        _atomic_write(self.ddl_file, b"".join(orjson.dumps(e) + b"\n" for e in entries))


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
