"""The order in which the shards' transactions were handed on, kept until it is committed.

A transaction's VGTID (its id, and every event's `source.vgtid`) holds every shard's
position at the moment VTGate sent it, so it depends on how VTGate interleaved the
shards, which differs from one VStream call to the next. After a crash, everything
handed on after the committed offset is read again; read in another interleaving, the
same shard transaction would come back with another id, and a consumer that waits for a
transaction's END (the Delta merge) would hold its first, cut delivery forever.

So before a batch leaves the source, the shard and new position of each of its
position-moving groups (transaction, DDL, other) are appended here and synced. A restart
from a committed VGTID replays the groups after it, shard by shard in that recorded
order (`source.VitessSource`), and only then streams the keyspace as a whole again: the
repeats are the first deliveries, byte for byte.

File: JSON lines. The first line is `{"version": 1, "from": {shard: gtid, ...}}`, the
position the entries follow; each further line is `[shard, gtid]`, a group of `shard`
that moved it to `gtid`. The file is rewritten from the committed position at every start
and, once it holds many entries, at a commit.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import orjson

from cdc_core.durable import replace_file
from cdc_core.errors import TidemarkError

log = logging.getLogger("tidemark.vitess")

VERSION = 1
COMPACT_AFTER = 20_000  # entries appended before a commit rewrites the file

Entry = tuple[str, str]  # (shard, the shard's position after the group)


class DeliveryOrder:
    """One connector's file of groups handed on past its committed position."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # the reader thread records, the main thread commits
        self._fd: int | None = None
        self._appended = 0  # entries appended since the file was last rewritten

    # ------------------------------------------------------------------ reading

    def read(self) -> tuple[dict[str, str], list[Entry]]:
        """(the position the entries follow, the entries), or ({}, []) with no file."""
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return {}, []
        if not lines:
            return {}, []
        try:
            header = orjson.loads(lines[0])
            if header.get("version") != VERSION:
                raise TidemarkError(
                    f"{self.path}: delivery order version {header.get('version')!r}, this Tidemark reads "
                    f"version {VERSION}"
                )
            base = {str(k): str(v) for k, v in header["from"].items()}
        except (orjson.JSONDecodeError, KeyError, AttributeError, TypeError):
            raise TidemarkError(
                f"{self.path}: not a delivery order file (its first line is unreadable)"
            ) from None
        entries: list[Entry] = []
        for line in lines[1:]:
            try:
                shard, gtid = orjson.loads(line)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                break  # a torn last line: the batch it began was never handed on
            entries.append((str(shard), str(gtid)))
        return base, entries

    @staticmethod
    def after(base: dict[str, str], entries: list[Entry], committed: dict[str, str]) -> list[Entry] | None:
        """The entries past `committed` (each shard's position), in their recorded order;
        None when `committed` is not a point of this record (a shard's position is neither
        the record's start nor one of its entries), so the record cannot say what came after."""
        last_at: dict[str, int] = {}  # per shard, the index of its entry at `committed`
        for i, (shard, gtid) in enumerate(entries):
            if committed.get(shard) == gtid:
                last_at[shard] = i
        for shard in {shard for shard, _ in entries} - set(last_at):
            if shard not in committed or base.get(shard) != committed[shard]:
                return None
            last_at[shard] = -1  # committed at the record's start: every entry of it is past it
        return [e for i, e in enumerate(entries) if i > last_at[e[0]]]

    # ------------------------------------------------------------------ writing

    def start(self, committed: dict[str, str] | None) -> list[Entry]:
        """The groups to replay past `committed` (None: a new start, nothing to replay); the
        file is rewritten to hold only them, following `committed`."""
        replay: list[Entry] = []
        if committed is not None:
            found: list[Entry] | None
            try:
                base, entries = self.read()
                found = self.after(base, entries, committed) if entries else []
            except TidemarkError as exc:  # the record is lost, nothing else: warn and go on
                log.warning("%s", exc)
                found = None
            if found is None:
                log.warning(
                    "%s does not reach back to the committed position; a restart's repeats may come in "
                    "another shard order than their first delivery",
                    self.path,
                )
            replay = found or []
        with self._lock:
            self._rewrite(committed or {}, replay)
        return replay

    def record(self, entries: list[Entry]) -> None:
        """Append and sync, before the groups' items leave the source."""
        if not entries:
            return
        data = b"".join(orjson.dumps(list(e)) + b"\n" for e in entries)
        with self._lock:
            if self._fd is None:
                raise TidemarkError("the delivery order is not open")
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
            self._appended += len(entries)

    def committed(self, position: dict[str, str]) -> None:
        """`position` is committed: once many entries piled up, drop those it covers."""
        with self._lock:
            if self._appended < COMPACT_AFTER or self._fd is None:
                return
            rest = self.after(*self.read(), position)
            if rest is not None:
                self._rewrite(position, rest)

    def _rewrite(self, base: dict[str, str], entries: list[Entry]) -> None:
        self._close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = orjson.dumps({"version": VERSION, "from": base}) + b"\n"
        replace_file(self.path, header + b"".join(orjson.dumps(list(e)) + b"\n" for e in entries))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._appended = 0

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
