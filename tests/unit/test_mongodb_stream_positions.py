"""Where the MongoDB change stream resumes: every resume token a server gives is kept in
the offsets and given back as it came; a watched collection dropped and its invalidate in
one batch go on after the invalidate; an idle stream's postBatchResumeToken is committed,
so a quiet collection's position stays within the oplog. The stream is pymongo's own
`ChangeStream.try_next` over a cursor that behaves as the server's does."""

from __future__ import annotations

import collections
import threading
from typing import Any

import orjson
import pymongo.errors
import pytest
from bson import Timestamp
from pymongo.synchronous.change_stream import ChangeStream

from cdc_core.connectors.mongodb import events
from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.source import MongoSource
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import PositionAdvance, RowChange

SIGNALS = TableSchema(TableId("shop", "signals"), (Column("id", "VARCHAR"),), ("id",))
TIME = Timestamp(1_700_000_000, 5)


def token_at(sec: int, inc: int, rest: str = "2B0229296E04") -> dict[str, Any]:
    """A resume token as a server writes it: a key string led by its cluster time."""
    return {"_data": f"82{sec:08X}{inc:08X}{rest}"}


class Cursor:
    """A change stream's command cursor: batches of changes, killed (cursor id 0) after
    the batch that ends it, each getMore reporting its postBatchResumeToken."""

    def __init__(self, batches: list[tuple[list[dict], bool]], tokens: list[dict] | None = None) -> None:
        self._data: collections.deque = collections.deque()
        self._killed = False
        self._batches, self._tokens = list(batches), list(tokens or [])
        self._post_batch_resume_token = None

    @property
    def alive(self) -> bool:
        return bool(self._data) or not self._killed

    def _has_next(self) -> bool:
        return bool(self._data)

    def _try_next(self, get_more: bool) -> dict | None:
        if not self._data and not self._killed and get_more:
            if self._tokens:
                self._post_batch_resume_token = self._tokens.pop(0)
            if self._batches:
                changes, self._killed = self._batches.pop(0)
                self._data.extend(changes)
        return self._data.popleft() if self._data else None

    def close(self) -> None:
        self._killed = True


class Stream(ChangeStream):
    """pymongo's ChangeStream over `Cursor`; its resume after a dead cursor asks `server`."""

    def __init__(self, cursor: Cursor, start: dict[str, Any], server: list[dict]) -> None:
        self._full_document = self._full_document_before_change = None
        self._uses_start_after = "start_after" in start
        self._uses_resume_after = "resume_after" in start
        self._resume_token = start.get("start_after") or start.get("resume_after")
        self._start_at_operation_time = None
        self._show_expanded_events = None
        self._closed = self._decode_custom = False
        self._timeout = None
        self._cursor = cursor
        self._server = server

    def _create_cursor(self) -> Cursor:
        options = self._change_stream_options()
        self._server.append(options)
        if "resumeAfter" in options and options["resumeAfter"].get("_data") == "INVALIDATE":
            raise pymongo.errors.OperationFailure("resumeAfter is not allowed from an invalidate", 260)
        return Cursor([])


def source(
    resume_from: dict[str, Any], cursors: list[Cursor], server: list[dict]
) -> tuple[MongoSource, list]:
    src = object.__new__(MongoSource)
    src.scope, src.target, src.mode = "collection", "shop.orders", "change_streams"
    src.await_ms, src.batch_size, src.poll = 10, 100, 0.0
    src._stop, src.renderer, src._start_at = threading.Event(), None, None
    src._resume_after = events.resume_token(resume_from)
    src.assembler = EventAssembler(
        "tm", {"resume_token": resume_from, "sec": 1, "ord": 0, "epoch": 0}, None, SIGNALS
    )
    watched: list[dict] = []

    def watch(start: dict[str, Any]) -> Stream:
        watched.append(start)
        if "resume_after" in start and start["resume_after"].get("_data") == "INVALIDATE":
            raise pymongo.errors.OperationFailure("resumeAfter is not allowed from an invalidate", 260)
        return Stream(cursors.pop(0) if cursors else Cursor([]), start, server)

    src._watch = watch
    return src, watched


def batches(src: MongoSource, count: int) -> list:
    items = []
    for n, batch in enumerate(src.read()):
        items += batch
        if n + 1 == count:
            break
    return items


def test_a_token_with_type_bits_is_kept_in_json_and_resumes_as_it_came():
    """A NumberLong, double or Decimal128 `_id` gives its token `_typeBits`, binary."""
    token = {**token_at(1_700_000_000, 5), "_typeBits": b"@"}
    insert = {"_id": token, "operationType": "insert", "clusterTime": TIME, "ns": {"db": "shop", "coll": "orders"},
              "documentKey": {"_id": 5}, "fullDocument": {"_id": 5, "n": 1}}  # fmt: skip
    assembler = EventAssembler("tm", {"sec": 1, "ord": 0, "epoch": 0}, None, SIGNALS)
    assert any(isinstance(item, RowChange) for item in assembler.feed(insert))
    stored = orjson.loads(orjson.dumps(assembler.position))  # as the offset store keeps it
    assert events.resume_token(stored["resume_token"]) == token
    assert events.token_time(stored["resume_token"]) == (1_700_000_000, 5)


def test_a_drop_and_its_invalidate_in_one_batch_go_on_after_the_invalidate():
    drop = {"_id": {"_data": "DROP"}, "operationType": "drop", "clusterTime": TIME,
            "ns": {"db": "shop", "coll": "orders"}}  # fmt: skip
    invalidate = {"_id": {"_data": "INVALIDATE"}, "operationType": "invalidate", "clusterTime": TIME}
    server: list[dict] = []
    src, watched = source({"_data": "START"}, [Cursor([([drop, invalidate], True)])], server)
    batches(src, 4)
    assert watched == [{"resume_after": {"_data": "START"}}, {"start_after": {"_data": "INVALIDATE"}}]
    assert server == []  # pymongo never resumed on its own, with resumeAfter


def test_a_restart_from_an_invalidate_token_goes_on_with_start_after():
    src, watched = source({"_data": "INVALIDATE"}, [], [])
    batches(src, 1)
    assert watched == [{"resume_after": {"_data": "INVALIDATE"}}, {"start_after": {"_data": "INVALIDATE"}}]


def test_an_idle_stream_commits_the_token_it_moved_to():
    tokens = [token_at(1_700_000_000, n) for n in (7, 7, 9)]
    src, _ = source(token_at(1_700_000_000, 5), [Cursor([], tokens)], [])
    advances = [i for i in batches(src, 4) if isinstance(i, PositionAdvance)]
    assert [(a.position["resume_token"], a.position["sec"], a.position["ord"]) for a in advances] == [
        (tokens[0], 1_700_000_000, 7),
        (tokens[2], 1_700_000_000, 9),  # the same token again moves nothing
    ]
    assert src.assembler.position == advances[-1].position


@pytest.mark.parametrize("data", ["", "zz", "01" * 9, "82" + "00" * 4])
def test_a_token_that_is_not_a_key_string_gives_no_time(data):
    assert events.token_time({"_data": data}) is None
