"""The MongoDB log reader (`cdc_core.source.Source`): a change stream → `LogItem`s.

One change stream at `capture.scope` (the deployment, a database, or a collection),
resumed after the committed resume token (`resumeAfter`; `startAfter` past an
`invalidate`), or on first start from the cluster time read at start
(`startAtOperationTime`). Update events carry the full document as `capture.mode` asks
(`updateLookup`, pre-images `whenAvailable`). The stream is polled with `try_next`: an
idle stream yields empty batches (the streamer can stop within a second) and closes an
open multi-document transaction, which a change stream shows whole or not at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mongodb import events, rendering
from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.field_rules import FieldRules
from cdc_core.connectors.mongodb.rendering import Renderer
from cdc_core.connectors.mongodb.session import MongoSession, client_for, hosts_of, list_collections, ping
from cdc_core.connectors.mongodb.shape import DocumentShaper, MongoTypeMapper, collection_schema
from cdc_core.connectors.mongodb.stream_pipeline import ORDER, PIPELINE, change_stream_pipeline
from cdc_core.errors import PositionLostError, SourceUnavailableError, TidemarkError
from cdc_core.filters import TableFilter
from cdc_core.schema.history import SchemaHistory
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import LogItem, PositionAdvance, SourceStatus

log = logging.getLogger("tidemark.mongodb")

# A change stream that cannot resume from the committed token: its history is gone.
HISTORY_LOST = {286, 280, 260}


def take_batch(stream: Any, limit: int) -> list[Any]:
    """The stream's next change and up to `limit` - 1 more of the batch its getMore
    brought, the stream's resume token moved past them as `try_next` moves it one change
    at a time. `try_next` reads each change's `_id` to do so, which makes a
    `RawBSONDocument` decode its whole top level: a quarter of the streamer's time when
    the changes are rendered from raw BSON. (pymongo's private cursor fields: pymongo is
    pinned in requirements.lock, and the resume tests fail if they change.)"""
    first = stream.try_next()
    if first is None:
        return []
    cursor = stream._cursor
    buffered = cursor._data
    rest = [buffered.popleft() for _ in range(min(len(buffered), limit - 1))]
    if rest:
        token = cursor._post_batch_resume_token if not buffered else None
        stream._resume_token = token if token is not None else rest[-1]["_id"]
        if not cursor.alive:  # the server closed it after an invalidate: as `try_next` marks it
            stream._closed = True
    return [first, *rest]


def newest_operation(client: Any) -> Any:
    """The deployment's newest operation time (a bson Timestamp): a replica set says it in
    every reply (`operationTime`), else the newest oplog entry; None without either."""
    reply = client.admin.command("ping")
    newest = reply.get("operationTime")
    if newest is None:
        entries = list(client.local["oplog.rs"].find({}, {"ts": 1}).sort("ts", -1).limit(1))
        newest = entries[0]["ts"] if entries else None
    return newest


class MongoSource:
    """`cdc_core.source.Source` for MongoDB."""

    connector_name = events.CONNECTOR

    def __init__(self, config: ConnectorConfig, history: SchemaHistory) -> None:
        self.config = config
        self.history = history  # collections have no schema to remember
        self.name = config.topic_prefix
        self.scope = config.get("capture.scope")
        self.target = config.get("capture.target")
        self.mode = config.get("capture.mode")
        self.poll = config.get("mongodb.poll.interval.ms") / 1000
        self.await_ms = config.get("cursor.max.await.time.ms")
        self.batch_size = config.get("max.batch.size")
        signal = config.get("signal.data.collection")
        self.signal = TableId.parse(signal) if signal else None
        self.signal_schema = TableSchema(
            self.signal or TableId("-", "-"),
            (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")),
            ("id",),
        )
        self.client: Any = None
        self.stream_client: Any = None  # the change stream's: raw BSON when rendering compiled
        self.assembler: EventAssembler | None = None
        self.renderer: Renderer | None = None
        self._tables: dict[TableId, TableSchema] = {}
        self._stop = threading.Event()
        self._resume_after: Any = None
        self._start_at: Any = None
        self.pipeline = change_stream_pipeline(config.get(PIPELINE), config.get(ORDER), self.signal)

    def type_mapper(self) -> MongoTypeMapper:
        return MongoTypeMapper(FieldRules.of(self.config))

    def source_schema(self) -> dict[str, Any]:
        return events.source_schema()

    def shaper(self, schema: TableSchema, topic: str, rules: Any, staged: Any = None) -> DocumentShaper:
        return DocumentShaper(schema, topic)

    # ------------------------------------------------------------------ start

    def open(self, offset: Mapping[str, Any] | None) -> None:
        self._open(offset, 0)

    def open_after_loss(self, lost: Mapping[str, Any]) -> None:
        """A first start at the cluster time now, its epoch one above the lost position's."""
        self._open(None, int(lost.get("epoch") or 0) + 1)

    def _open(self, offset: Mapping[str, Any] | None, epoch: int) -> None:
        if self.signal is not None and not self._watches(self.signal):
            raise TidemarkError(
                f"signal.data.collection {self.signal} is outside capture.scope {self.scope} ({self.target}): "
                "the change stream would never show its signals or a snapshot's watermarks; put it in the "
                "watched database or widen capture.scope"
            )
        where = hosts_of(self.config.get("mongodb.connection.string"))
        self.client = client_for(self.config)
        ping(self.client, where)
        if self.scope != "deployment" and not self.target:
            raise TidemarkError(f"capture.scope {self.scope} needs capture.target")
        wanted = TableFilter(self.config)
        for table in list_collections(self.client):
            if wanted.captures(table) and table != self.signal:
                self._tables[table] = collection_schema(table)
        if self.signal is not None:
            self._tables[self.signal] = self.signal_schema
        position = dict(offset["source"]) if offset else None
        if position and position.get("resume_token"):
            self._resume_after = events.resume_token(position["resume_token"])
        elif position and position.get("sec") is not None:
            # Started before and stopped before any event: from that start again, so
            # nothing written while it was down is skipped.
            from bson import Timestamp

            self._start_at = Timestamp(int(position["sec"]), int(position.get("ord") or 0))
        else:
            self._start_at = self._cluster_time_now()
            position = {"sec": self._start_at.time, "ord": self._start_at.inc, "epoch": epoch}
        self.assembler = EventAssembler(
            self.name,
            position,
            self.signal,
            self.signal_schema,
            failure_mode=self.config.get("event.processing.failure.handling.mode"),
            field_rules=FieldRules.of(self.config),
        )
        # Changes are read as raw BSON on either path: pymongo never decodes a document
        # (one it cannot hold would stop the stream before the connector sees it).
        self.stream_client = client_for(self.config, raw=True)
        if self.config.get("mongodb.rendering") == "compiled":
            if not rendering.available():
                raise TidemarkError(
                    "mongodb.rendering is compiled but the MongoDB transcoder is not built: run `make install` "
                    "(it builds cdc_core/connectors/mongodb/transcoder with cargo), or set mongodb.rendering: python"
                )
            blocks = bool(self.config.get("provide.transaction.metadata"))
            self.renderer = rendering.Renderer(self.assembler, blocks=blocks)

    def _cluster_time_now(self) -> Any:
        """Where a first start begins: just after the deployment's newest operation
        (`newest_operation`), else the clock. `startAtOperationTime` includes the operation
        at that very time, which happened before the start: it would be emitted."""
        from bson import Timestamp

        newest = newest_operation(self.client)
        if newest is not None:
            return Timestamp(newest.time, newest.inc + 1)
        return Timestamp(int(time.time()), 0)

    # ------------------------------------------------------------------ the stream

    def _watch(self, start: dict[str, Any]) -> Any:
        """A change stream at the connector's scope from `start` (resume_after, start_after or
        start_at_operation_time), its documents as `capture.mode` asks, through the stages of
        `cursor.pipeline` (`stream_pipeline.py`)."""
        options: dict[str, Any] = {"pipeline": self.pipeline, "max_await_time_ms": self.await_ms, **start}
        if "update_full" in self.mode:
            post_image = self.config.get("capture.mode.full.update.type") == "post_image"
            options["full_document"] = "required" if post_image else "updateLookup"
        if "pre_image" in self.mode:
            options["full_document_before_change"] = "whenAvailable"
        client = self.stream_client
        if self.scope == "collection":
            database, _, collection = self.target.partition(".")
            return client[database][collection].watch(**options)
        if self.scope == "database":
            return client[self.target].watch(**options)
        return client.watch(**options)

    def _watches(self, table: TableId) -> bool:
        if self.scope == "database":
            return table.database == self.target
        return self.scope == "deployment" or table == self._watched()

    def _watched(self) -> TableId | None:
        if self.scope == "collection":
            database, _, collection = self.target.partition(".")
            return TableId(database, collection)
        return None

    def read(self) -> Iterator[list[LogItem]]:
        import pymongo.errors

        assert self.assembler is not None, "open() first"
        watched = self._watched()
        try:
            if self._resume_after is not None:
                try:
                    stream = self._watch({"resume_after": self._resume_after})
                except pymongo.errors.OperationFailure as exc:
                    if exc.code != 260:
                        raise
                    # An invalidate's token (a restart inside the transaction after it)
                    # resumes only with startAfter.
                    stream = self._watch({"start_after": self._resume_after})
            else:
                stream = self._watch({"start_at_operation_time": self._start_at})
                # The start is committed before any event: a restart, however soon, goes
                # on from here rather than from its own "now".
                yield [PositionAdvance(dict(self.assembler.position), int(time.time() * 1000))]
            while not self._stop.is_set():
                events: list[Any] = []
                idle = False
                deadline = time.monotonic() + 0.5
                while len(events) < self.batch_size and time.monotonic() < deadline:
                    taken = take_batch(stream, self.batch_size - len(events))
                    if not taken:
                        idle = True
                        break
                    events += taken
                batch = self._items(events, watched)
                if idle:
                    batch += self.assembler.close()  # idle: a transaction shown is whole
                    if not stream.alive:  # invalidated (a watched collection dropped): go on after it
                        token = stream.resume_token
                        stream.close()
                        stream = self._watch({"start_after": token})
                    else:
                        moved = self.assembler.idle_at(stream.resume_token)
                        if moved is not None:
                            batch.append(PositionAdvance(moved, moved["sec"] * 1000))
                yield batch
                if all(isinstance(item, PositionAdvance) for item in batch):
                    self._stop.wait(self.poll)
        except pymongo.errors.OperationFailure as exc:
            if exc.code in HISTORY_LOST:
                raise PositionLostError(
                    f"the change stream cannot resume from the committed resume token ({exc.details or exc}): the "
                    "oplog no longer holds it. With snapshot.mode: when_needed the streamer starts again at the "
                    "current position and snapshots every collection; otherwise remove the connector's offsets "
                    "and take a snapshot (snapshot.mode: initial, or an execute-snapshot signal) to start again"
                ) from None
            raise TidemarkError(f"the change stream failed: {exc.details or exc}") from None
        except pymongo.errors.PyMongoError as exc:
            raise SourceUnavailableError(f"the change stream broke: {exc}") from None

    def _items(self, events: list[Any], watched: TableId | None) -> list[LogItem]:
        assert self.assembler is not None
        if self.renderer is not None:
            return self.renderer.items([event.raw for event in events], watched)
        items: list[LogItem] = []
        for event in events:
            items += self.assembler.feed(event, watched)
        return items

    def stop(self) -> None:
        self._stop.set()

    def committed(self, offset: Mapping[str, Any]) -> None:
        """Nothing is kept past the committed offset: the log itself repeats in order."""

    def close(self) -> None:
        self.stop()
        if self.stream_client is not None and self.stream_client is not self.client:
            self.stream_client.close()
        self.stream_client = None
        if self.client is not None:
            self.client.close()
            self.client = None

    # ------------------------------------------------------------------ the rest of `Source`

    def current_tables(self) -> Mapping[TableId, TableSchema]:
        return self._tables

    def partitions(self, table: TableId) -> tuple[str | None, ...]:
        return (None,)

    def chunk_source(self) -> MongoSession:
        return MongoSession(self.config)

    def position_watermarks(self) -> Any:
        raise TidemarkError(
            "read.only snapshots need GTID positions; MongoDB snapshots use the signal collection"
        )

    def status(self, offset: Mapping[str, Any] | None) -> SourceStatus:
        position = self.describe(offset["source"]) if offset else "none (not started)"
        return SourceStatus(self.connector_name, position, self._head(), None)

    def _head(self) -> str:
        """The deployment's newest operation time, or why it cannot be read: unreachable,
        the user refused, no operation time. It asks through its own short-lived client when
        the source is not open (`tidemark status`). Messages name the hosts only."""
        import pymongo.errors

        where = hosts_of(self.config.get("mongodb.connection.string"))
        client = self.client
        try:
            if client is None:
                client = client_for(self.config, timeout_ms=5_000)
            newest = newest_operation(client)
        except pymongo.errors.OperationFailure as exc:
            message = (exc.details or {}).get("errmsg") or f"code {exc.code}"
            if exc.code in (13, 18):  # Unauthorized, AuthenticationFailed
                return f"refused: MongoDB refused the connector's user at {where} ({message}); {self._login_hint()}"
            return f"unavailable: MongoDB at {where} answered: {message}"
        except pymongo.errors.ConfigurationError as exc:
            uri = self.config.get("mongodb.connection.string")
            return f"unavailable: mongodb.connection.string cannot be used: {str(exc).replace(uri, where)}"
        except pymongo.errors.PyMongoError as exc:
            return f"unreachable: cannot reach MongoDB at {where}: {str(exc).split(', Timeout:')[0]}"
        finally:
            if client is not None and client is not self.client:
                client.close()
        if newest is None:
            return (
                f"unknown: MongoDB at {where} gives no operation time and has no oplog (not a replica set?)"
            )
        return f"clusterTime {newest.time}.{newest.inc}"

    def _login_hint(self) -> str:
        variable = self.config.get("database.password.env")
        user = self.config.get("database.user")
        if self.config.secret("database.password") is None:
            password = f"no password: set the environment variable {variable} (database.password.env)"
        else:
            password = f"the password from {variable} (database.password.env) or the Airflow connection"
        return f"check the user ({user or 'none set: database.user'}), {password}, and the user's roles"

    def describe(self, position: Mapping[str, Any]) -> str:
        from cdc_core.connectors.mongodb.connector import CONNECTOR

        return CONNECTOR.describe_position(position)
