"""Change events rendered by compiled code (`transcoder/`, built by `make install`):
from the stream's raw BSON straight to the records' JSON, for changes outside any
transaction, which are most of a stream. pymongo never decodes them into Python objects
and no Python runs per change: the Python path costs about 50 µs a change, four times
what pymongo's decoding alone does.

The compiled renderer stops at any event it does not render itself (a transaction's, the
signal collection's, a drop, a BSON type it does not know); `MongoSource` hands that one
to `EventAssembler`, then calls it again. Each run of one collection becomes a
`RenderedChanges`, whose `expand()` replays its raw events through a fresh assembler from
the position before them, for the snapshot stage and the dispatcher where they look at
changes one by one. `tests/unit/test_mongodb_transcoder.py` holds both paths to the same
bytes.
"""

from __future__ import annotations

import time
from typing import Any

from bson import decode

from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.ext_json import relaxed, strict
from cdc_core.connectors.mysql.source_info import TIDEMARK_VERSION
from cdc_core.schema.model import TableId
from cdc_core.source import LogItem, RenderedChanges

try:
    from tidemark_mongodb_transcoder import render, render_reply
except ImportError:  # not built: `make install` builds it (scripts/build_transcoder.sh)
    render = render_reply = None


def available() -> bool:
    return render is not None


class Renderer:
    """Runs of raw change events → `RenderedChanges` items, the assembler moved past them."""

    def __init__(self, assembler: EventAssembler, codec: Any, blocks: bool) -> None:
        if render is None:
            raise RuntimeError("the MongoDB transcoder is not built: run `make install`")
        self.assembler = assembler
        self.codec = codec  # how the Python path decodes an event (the client's options)
        self.blocks = blocks  # `provide.transaction.metadata`: each change's transaction block
        signal = assembler.signal
        self._signal = (signal.database, signal.table) if signal is not None else ("", "")

    def items(self, raws: list[bytes], watched: TableId | None) -> list[LogItem]:
        """The items of a batch of raw change events, in log order."""
        out: list[LogItem] = []
        assembler = self.assembler
        index = 0
        while index < len(raws):
            if not assembler.in_transaction:
                index = self._rendered(raws, index, watched, out)
                if index >= len(raws):
                    break
            out += assembler.feed(decode(raws[index], self.codec), watched)
            index += 1
        return out

    def _rendered(self, raws: list[bytes], start: int, watched: TableId | None, out: list[LogItem]) -> int:
        assembler = self.assembler
        runs = render(
            raws,
            start,
            assembler.name,
            TIDEMARK_VERSION,
            self._signal,
            None if watched is None else (watched.database, watched.table),
            time.time_ns(),
            assembler.epoch,
            assembler.last_rank,
            self.blocks,
        )
        index = start
        for db, coll, rows, ts_ms, token, sec, inc, epoch in runs:
            before = assembler.position
            after = {"resume_token": {"_data": token}, "sec": sec, "ord": inc, "epoch": epoch}
            events = raws[index : index + len(rows)]
            index += len(rows)
            table = assembler.schema(TableId(db, coll))
            out.append(RenderedChanges(table, rows, after, ts_ms, self._replay(events, before, watched)))
            assembler.moved_to(after)
        return index

    def _replay(self, raws: list[bytes], position: dict[str, Any], watched: TableId | None) -> Any:
        """The Python path's items for these events, from the position before them."""
        main = self.assembler

        def expand() -> list[LogItem]:
            again = EventAssembler(main.name, position, main.signal, main.signal_schema, main.known_schemas)
            items: list[LogItem] = []
            for raw in raws:
                items += again.feed(decode(raw, self.codec), watched)
            return items

        return expand


def reply_documents(reply: bytes, codec: Any) -> tuple[list[str], list[str], int]:
    """The `_id`s (relaxed Extended JSON) and documents (strict) of one raw `find` or
    `getMore` reply, as the Python path writes them, and the reply's cursor id: rendered
    by the transcoder, or, for a document it leaves, decoded by pymongo and written by
    `ext_json.py`."""
    ids, texts, left, cursor = render_reply(reply)
    for index, raw in left:
        document = decode(raw, codec)
        ids[index], texts[index] = relaxed(document["_id"]), strict(document)
    return ids, texts, cursor
