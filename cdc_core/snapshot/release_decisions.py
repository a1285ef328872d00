"""What a window's HW released, kept until no committed offset can lead back to the HW.

A replayed HW (the streamer restarted from before it) must release exactly the same rows
again, and a read-only release, which is not in the log at all, must be replayable from
what is kept here alone. Typed JSON with a version field (values in `keycodec`'s exact
form); decisions written by older versions as pickles are still read, so an upgrade never
strands a window between its release and the commit after it.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.snapshot.keycodec import decode_key, encode_key
from cdc_core.snapshot.open_windows import window_from_json, window_to_json
from cdc_core.snapshot.windows import Window
from cdc_core.source import TransactionBegin

VERSION = 1


@dataclass(frozen=True)
class ReleaseDecision:
    window: Window
    source: dict[str, Any]  # the source block of the released events
    shaped: str | None = None  # digest of the staged form the rows were in (None: the table's own)
    rows: tuple[tuple[Any, ...], ...] | None = None  # a stream release's rows (None: lakehouse)
    dropped: int = 0  # rows the stream superseded inside the window
    # A read-only release: its synthetic BEGIN, the position marker it waited for, the
    # table's columns at the chunk read.
    begin: TransactionBegin | None = None
    marker: str | None = None
    columns: tuple[str, ...] | None = None

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {
            "version": VERSION,
            "window": window_to_json(self.window),
            "source": self.source,
            "shaped": self.shaped,
            "dropped": self.dropped,
        }
        if self.rows is not None:
            body["rows"] = [encode_key(row) for row in self.rows]
        if self.begin is not None:
            b = self.begin
            body["begin"] = {"id": b.id, "epoch": b.epoch, "rank": b.rank, "ts_ms": b.ts_ms,
                             "restart": b.restart, "synthetic": b.synthetic}  # fmt: skip
            body["marker"] = self.marker
            body["columns"] = list(self.columns or ())
        return orjson.dumps(body)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReleaseDecision:
        if data[:1] == b"\x80":  # a pickle (protocol 2+): written before this format
            return cls.from_legacy(pickle.loads(data))
        body = orjson.loads(data)
        if body.get("version") != VERSION:
            raise TidemarkError(
                f"a release record has format version {body.get('version')}; this Tidemark reads {VERSION}"
            )
        b = body.get("begin")
        return cls(
            window_from_json(body["window"]),
            body["source"],
            body.get("shaped"),
            None if body.get("rows") is None else tuple(decode_key(r) for r in body["rows"]),  # type: ignore[misc]
            int(body.get("dropped", 0)),
            None if b is None else TransactionBegin(**b),
            body.get("marker"),
            None if b is None else tuple(body.get("columns", ())),
        )

    @classmethod
    def from_legacy(cls, d: dict[str, Any]) -> ReleaseDecision:
        """A decision as versions before the JSON format pickled it (a dict)."""
        rows = d.get("rows")
        return cls(
            d["window"],
            d["source"],
            d.get("shaped"),
            None if rows is None else tuple(tuple(r) for r in rows),
            int(d.get("dropped", 0)),
            d.get("begin"),
            d.get("marker"),
            None if d.get("columns") is None else tuple(d["columns"]),
        )
