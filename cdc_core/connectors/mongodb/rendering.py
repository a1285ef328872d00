"""Change events rendered by compiled code (`transcoder/`, built by `make install`):
from the stream's raw BSON straight to the records' JSON, for changes outside any
transaction, which are most of a stream. pymongo never decodes them into Python objects
and no Python runs per change: the Python path costs about 50 µs a change, four times
what pymongo's decoding alone does.

The compiled renderer stops at any event it does not render itself (a transaction's, the
signal collection's, a drop or any other kind, one whose BSON is malformed); `Renderer`
hands that one to `EventAssembler`, which renders it or applies
`event.processing.failure.handling.mode` to it, then calls the compiled renderer again.
Every value MongoDB stores is rendered by both, the same way (`bson_text.py`), so no
event goes the Python way for a value's type. Each run of one collection becomes a
`RenderedChanges`, whose `expand()` replays its raw events through a fresh assembler from
the position before them, for the snapshot stage and the dispatcher where they look at
changes one by one. `tests/unit/test_mongodb_transcoder.py` holds both paths to the same
bytes.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cdc_core.connectors.mongodb.bson_text import (
    RELAXED,
    STRICT,
    MalformedBson,
    RawValue,
    document_value,
    value_of,
)
from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.field_rules import FieldPath, apply_to_document
from cdc_core.connectors.mysql.source_info import TIDEMARK_VERSION
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.source import LogItem, RenderedChanges

try:
    from tidemark_mongodb_transcoder import FieldRules as CompiledRules
    from tidemark_mongodb_transcoder import render_changes as render
    from tidemark_mongodb_transcoder import render_find_reply as render_reply
except ImportError:  # not built, or built before every type was rendered: `make install`
    render = render_reply = CompiledRules = None


log = logging.getLogger("tidemark.mongodb")


def available() -> bool:
    return render is not None


class Renderer:
    """Runs of raw change events → `RenderedChanges` items, the assembler moved past them."""

    def __init__(self, assembler: EventAssembler, codec: Any = None, blocks: bool = True) -> None:
        if render is None:
            raise RuntimeError("the MongoDB transcoder is not built: run `make install`")
        self.assembler = assembler
        del codec  # (events are read from their BSON, whatever the connection's options)
        self.blocks = blocks
        # field.exclude.list / field.renames of each collection the Python side has met;
        # the compiled renderer leaves an event of a collection not in it to the Python
        # path, which matches the collection's namespace and adds its rules here.
        self._rules = (
            None if assembler.field_rules is None else CompiledRules()
        )  # `provide.transaction.metadata`: each change's transaction block
        signal = assembler.signal
        self._signal = (signal.database, signal.table) if signal is not None else ("", "")

    def items(self, raws: list[bytes | memoryview], watched: TableId | None) -> list[LogItem]:
        """The items of a batch of raw change events, in log order."""
        out: list[LogItem] = []
        assembler = self.assembler
        index = 0
        while index < len(raws):
            if not assembler.in_transaction:
                index = self._rendered(raws, index, watched, out)
                if index >= len(raws):
                    break
            out += assembler.feed_raw(raws[index], watched)
            self._know(assembler.last_table)
            index += 1
        return out

    def _rendered(
        self, raws: list[bytes | memoryview], start: int, watched: TableId | None, out: list[LogItem]
    ) -> int:
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
            **({} if self._rules is None else {"field_rules": self._rules}),
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

    def _know(self, table: TableId | None) -> None:
        rules = self.assembler.field_rules
        if self._rules is None or rules is None or table is None:
            return
        if (table.database, table.table) not in self._rules:
            self._rules.add(table.database, table.table, [p.as_tuple() for p in rules.of_table(table)])

    def _replay(
        self, raws: list[bytes | memoryview], position: dict[str, Any], watched: TableId | None
    ) -> Any:
        """The Python path's items for these events, from the position before them."""
        main = self.assembler

        def expand() -> list[LogItem]:
            again = EventAssembler(
                main.name,
                position,
                main.signal,
                main.signal_schema,
                main.known_schemas,
                main.failure_mode,
                main.field_rules,
            )
            items: list[LogItem] = []
            for raw in raws:
                items += again.feed_raw(raw, watched)
            return items

        return expand


def reply_documents(
    reply: bytes | memoryview,
    codec: Any = None,
    failure_mode: str = "fail",
    where: str = "a collection",
    paths: tuple[FieldPath, ...] = (),
) -> tuple[list[str], list[str], int]:
    """The `_id`s (relaxed Extended JSON) and documents (strict) of one raw `find` or
    `getMore` reply, as the Python path writes them, and the reply's cursor id: rendered
    by the transcoder, or, for a document it leaves (malformed BSON), by `bson_text.py`.
    A document neither can read follows `failure_mode` (event.processing.failure.handling
    .mode): `fail` stops naming it by its `_id` (never its contents), `warn`/`skip` leave
    it out of the window (logged with warn). `paths`: the collection's field.exclude.list
    / field.renames rules, applied to the documents."""
    del codec
    if paths:
        ids, texts, left, cursor = render_reply(reply, [p.as_tuple() for p in paths])
    else:
        ids, texts, left, cursor = render_reply(reply)
    unreadable = set()
    for index, raw in left:
        found = readable_document(raw, where, failure_mode, paths)
        if found is None:
            unreadable.add(index)
        else:
            ids[index], texts[index] = found[0].text(RELAXED), found[1].text(STRICT)
    if unreadable:
        ids = [v for i, v in enumerate(ids) if i not in unreadable]
        texts = [v for i, v in enumerate(texts) if i not in unreadable]
    return ids, texts, cursor


def readable_document(
    raw: bytes, where: str, failure_mode: str, paths: tuple[FieldPath, ...] = ()
) -> tuple[RawValue, RawValue] | None:
    """A snapshot's document as its `_id` and itself (`paths`, its collection's field
    rules, applied), both read (`bson_text.py`); None when it cannot be read and
    `failure_mode` leaves it out."""
    try:
        document = document_value(apply_to_document(raw, paths) if paths else raw)
        key = value_of(raw, "_id")
        if key is None:
            raise MalformedBson("a document without its _id")
        key.text(RELAXED)
        document.text(STRICT)
        return key, document
    except MalformedBson as exc:
        skipped_document(where, _id_of(raw), str(exc), failure_mode)
        return None


def _id_of(raw: bytes) -> str | None:
    try:
        key = value_of(raw, "_id")
        return None if key is None else key.text(RELAXED)
    except MalformedBson:
        return None


def skipped_document(where: str, key: str | None, reason: str, failure_mode: str) -> None:
    """A snapshot's document that cannot be read: stop (`fail`) or leave it out."""
    what = f"a document of {where} (_id {key or 'unreadable'})"
    if failure_mode == "fail":
        raise TidemarkError(
            f"cannot read {what}: {reason}. event.processing.failure.handling.mode=fail stops here; set it to "
            "warn or skip to leave such a document out of the snapshot"
        )
    if failure_mode == "warn":
        log.warning(
            "left %s out of the snapshot: %s (event.processing.failure.handling.mode=warn)", what, reason
        )
