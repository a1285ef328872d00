"""The Vitess log reader (`cdc_core.source.Source`): VStream → `LogItem`s.

It starts from the committed VGTID, or without one from VTGate's copy phase
(`snapshot.mode: initial`, every shard at `""`) or from `vitess.gtid` (`current` by
default: VTGate resolves each shard's position and sends it first). Every offset is a
VGTID with each shard's epoch (`events.EventAssembler`).

After a crash, everything handed on after the committed offset is read again, and must
come back as it went out: the pipeline suppresses the rows of a cut transaction that were
acknowledged, which needs that transaction first and whole, and a transaction's id is its
VGTID, which depends on how VTGate interleaved the shards. VStream interleaves them
differently on every call, so the order the groups were handed on in is recorded
(`delivery_order`), and a restart replays the groups past the committed VGTID in that
order, each from a VStream of its shard alone, before it streams the whole keyspace from
the VGTID after them. Without a record reaching back that far (a state directory from
before it), a restart inside a transaction still reads that transaction's shard alone up
to its COMMIT first. Nothing is lost, and every repeat is identical to its first delivery.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.snapshot_properties import SNAPSHOT_AT_FIRST_START
from cdc_core.connectors.vitess import source_info
from cdc_core.connectors.vitess.copy_progress import CopyProgress
from cdc_core.connectors.vitess.delivery_order import DeliveryOrder, Entry
from cdc_core.connectors.vitess.events import EventAssembler
from cdc_core.connectors.vitess.positions import COPY, CURRENT
from cdc_core.connectors.vitess.session import VitessSession
from cdc_core.connectors.vitess.types import VitessModes, VitessTypeMapper
from cdc_core.connectors.vitess.vgtid import Vgtid, for_keyspace
from cdc_core.connectors.vitess.vstream import ENDED, StreamSettings, VStreamCall, open_channel, stubs
from cdc_core.errors import SourceUnavailableError, TidemarkError
from cdc_core.filters import RowShaper, TableFilter
from cdc_core.schema.history import SchemaHistory
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import LogItem, SourceStatus

log = logging.getLogger("tidemark.vitess")


def stream_settings(config: ConnectorConfig) -> StreamSettings:
    metadata: list[tuple[str, str]] = []
    for pair in filter(None, (p.strip() for p in (config.get("vitess.grpc.headers") or "").split(","))):
        key, sep, value = pair.partition(":")
        if not sep:
            raise TidemarkError(f"vitess.grpc.headers: {pair!r} is not key:value")
        metadata.append((key.strip().lower(), value.strip()))
    secret = config.secret("database.password")
    if secret is not None and secret.reveal():  # VTGate's static gRPC authentication
        metadata += [("username", config.get("database.user")), ("password", secret.reveal())]
    return StreamSettings(
        target=f"{config.get('database.hostname')}:{config.get('database.port')}",
        tablet_type=config.get("vitess.tablet.type"),
        stop_on_reshard=config.get("vitess.stop_on_reshard"),
        keyspace_heartbeats=config.get("vitess.stream.keyspace.heartbeats"),
        heartbeat_seconds=config.get("heartbeat.interval.ms") // 1000,
        max_message_bytes=config.get("vitess.grpc.max_inbound_message_size"),
        metadata=tuple(metadata),
    )


class VitessSource:
    """`cdc_core.source.Source` for a Vitess keyspace."""

    connector_name = source_info.CONNECTOR

    def __init__(self, config: ConnectorConfig, history: SchemaHistory) -> None:
        self.config = config
        self.history = history  # not used: every row's schema comes with VStream's FIELD events
        self.name = config.topic_prefix
        self.keyspace = config.get("vitess.keyspace")
        self.configured_shards = tuple(config.get("vitess.shard") or ())
        self.modes = VitessModes.from_config(config)
        self.settings = stream_settings(config)
        self.batch_size = config.get("max.batch.size")
        self.assembler: EventAssembler | None = None
        self._channel: Any = None
        self._call: VStreamCall | None = None
        self._first_shard: str | None = None  # a restart inside this shard's transaction
        self.order = DeliveryOrder(config.state_directory() / "vitess_delivery_order.jsonl")
        self._replay: list[Entry] = []  # groups handed on past the committed offset, in order
        self._stop = threading.Event()

    def type_mapper(self) -> VitessTypeMapper:
        return VitessTypeMapper(self.modes)

    def source_schema(self) -> dict[str, Any]:
        return source_info.source_schema()

    # ------------------------------------------------------------------ start

    def open(self, offset: Mapping[str, Any] | None) -> None:
        self._open(offset, 0)

    def open_after_loss(self, lost: Mapping[str, Any]) -> None:
        """A first start (the copy phase), every shard's epoch above those of the lost
        position (`EventAssembler.epoch_floor`)."""
        epochs = [int(e) for e in (lost.get("epochs") or {}).values()]
        floor = max([*epochs, int(lost.get("epoch_floor", 0))], default=0) + 1
        self._open(None, floor)

    def _open(self, offset: Mapping[str, Any] | None, epoch_floor: int) -> None:
        pb = stubs()
        tables = self._schemas_now()
        if offset is not None:
            position = offset["source"]
            vgtid = Vgtid.from_json(position["vgtid"])
            epochs = {k: int(v) for k, v in position.get("epochs", {}).items()}
            epoch_floor = int(position.get("epoch_floor", 0))
            if offset.get("in_txn") and position.get("shard"):
                self._first_shard = position["shard"]
            schema_seq = int(offset.get("schema_seq", 0))
            copy = CopyProgress.from_json(position.get("copy"))
            # (inside the copy phase a restart copies again: no order to keep)
            copying = vgtid.copying() or copy is not None
            self._replay = self.order.start(None if copying else vgtid.positions())
        else:
            vgtid, epochs, schema_seq = self._start_vgtid(), {}, 0
            copy = CopyProgress(tuple(sorted(t.table for t in tables))) if vgtid.copying() else None
            self.order.start(None)
        self._channel = open_channel(self.settings)
        type_names = pb.query.Type.Name
        self.assembler = EventAssembler(
            self.name, self.keyspace, vgtid, epochs, tables, type_names, schema_seq, copy, epoch_floor
        )

    def _start_vgtid(self) -> Vgtid:
        if self.config.get("snapshot.mode") in SNAPSHOT_AT_FIRST_START:
            return for_keyspace(self.keyspace, self.configured_shards, COPY)
        start = self.config.get("vitess.gtid")
        if start == CURRENT:
            return for_keyspace(self.keyspace, self.configured_shards, CURRENT)
        vgtid = Vgtid.from_json(start)
        wrong = [s for s in vgtid.shards if s.keyspace != self.keyspace]
        if wrong or (self.configured_shards and set(vgtid.shard_names) != set(self.configured_shards)):
            raise TidemarkError(
                "vitess.gtid: its shards must be those of vitess.shard, in keyspace vitess.keyspace "
                f"({self.keyspace}); got {vgtid.to_json()}"
            )
        return vgtid

    def _schemas_now(self) -> dict[TableId, TableSchema]:
        """The captured tables' definitions at start (VStream describes a table only with its
        next change), so that signals and snapshots know every table from the start."""
        session = VitessSession(self.config)
        try:
            wanted = TableFilter(self.config)
            signal = self.config.get("signal.data.collection")
            found = {}
            for table in session.list_tables():
                if wanted.captures(table) or str(table) == signal:
                    found[table] = session.table_schema(table)
            return found
        finally:
            session.close()

    # ------------------------------------------------------------------ the stream

    def read(self) -> Iterator[list[LogItem]]:
        assert self.assembler is not None, "open() first"
        if self._replay:
            entries, self._replay, self._first_shard = self._replay, [], None
            yield from self._replayed(entries)
        elif self._first_shard is not None:
            shard, self._first_shard = self._first_shard, None
            log.info("resuming inside a transaction of shard %s: reading it alone first", shard)
            yield from self._stream(self.assembler.request(self.assembler.vgtid.only(shard)), partial=True)
        if not self._stop.is_set():
            yield from self._stream(self.assembler.request(self.assembler.vgtid), partial=False)

    def _stream(self, vgtid: Vgtid, partial: bool) -> Iterator[list[LogItem]]:
        """One VStream call. `partial`: one shard alone, up to its first transaction's end."""
        assert self.assembler is not None
        types = stubs().binlogdata.VEventType
        call = self._call = VStreamCall(self._channel, self.settings, vgtid)
        ends = (types.COMMIT, types.DDL, types.OTHER)
        try:
            while not self._stop.is_set():
                batch: list[LogItem] = []
                response = call.next(timeout=1.0)
                while response is not None:
                    if response is ENDED:
                        yield self._recorded(batch)
                        self._ended()
                    done = False
                    for event in response.events:
                        batch.extend(self.assembler.feed(event, types, partial))
                        done = done or (partial and event.type in ends)
                    if self.settings.stop_on_reshard and self.assembler.at_reshard:
                        # VTGate ends only the resharded shard's stream (the others go on):
                        # the journal itself is where the streamer stops.
                        yield self._recorded(batch)
                        self._ended()
                    if done:
                        yield self._recorded(batch)
                        return
                    if len(batch) >= self.batch_size:
                        break
                    response = call.next(timeout=0)
                yield self._recorded(batch)
        finally:
            call.cancel()
            self._call = None

    def _recorded(self, batch: list[LogItem]) -> list[LogItem]:
        """`batch`, once the order of its groups is on disk (`delivery_order`)."""
        assert self.assembler is not None
        self.order.record(self.assembler.take_groups())
        return batch

    def _replayed(self, entries: list[Entry]) -> Iterator[list[LogItem]]:
        """The groups handed on past the committed offset, again and in the same order:
        one VStream per shard concerned, read a group at a time as the record says."""
        assert self.assembler is not None
        types = stubs().binlogdata.VEventType
        ends = (types.COMMIT, types.DDL, types.OTHER)
        shards = list(dict.fromkeys(shard for shard, _ in entries))
        log.info(
            "resuming: %d group(s) of shard(s) %s handed on before the restart are read again in their order",
            len(entries),
            ", ".join(shards),
        )
        vgtid = self.assembler.vgtid
        calls = {
            s: VStreamCall(self._channel, self.settings, self.assembler.request(vgtid.only(s)))
            for s in shards
        }
        waiting: dict[str, deque[Any]] = {s: deque() for s in shards}
        batch: list[LogItem] = []
        try:
            for shard, gtid in entries:
                while self._position(shard) != gtid:
                    if self._stop.is_set():
                        return
                    if not waiting[shard]:
                        response = calls[shard].next(timeout=1.0)
                        if response is None:
                            yield batch  # (the caller may stop)
                            batch = []
                            continue
                        if response is ENDED:
                            raise SourceUnavailableError(
                                f"VTGate {self.settings.target} ended the VStream of shard {shard}"
                            )
                        waiting[shard].extend(response.events)
                    before = self._position(shard)
                    event = waiting[shard].popleft()
                    batch.extend(self.assembler.feed(event, types, partial=True))
                    moved = self._position(shard)
                    if event.type in ends and moved not in (before, gtid):
                        log.warning(
                            "shard %s moved to %s, where the delivery order has %s next: the rest of the "
                            "restart's repeats may come in another shard order than their first delivery",
                            shard,
                            moved,
                            gtid,
                        )
                        yield batch
                        return
                if len(batch) >= self.batch_size:
                    yield batch
                    batch = []
            yield batch
        finally:
            self.assembler.take_groups()  # recorded already
            for call in calls.values():
                call.cancel()

    def _position(self, shard: str) -> str | None:
        assert self.assembler is not None
        entry = self.assembler.vgtid.shard(shard)
        return entry.gtid if entry is not None else None

    def _ended(self) -> None:
        """VTGate ended the stream: at a reshard with stop_on_reshard, on purpose."""
        assert self.assembler is not None
        journal = self.assembler.journal
        if journal is not None and self.settings.stop_on_reshard:
            old = ", ".join(p.shard for p in journal.participants)
            new = Vgtid.from_proto(type("J", (), {"shard_gtids": journal.shard_gtids})())
            raise TidemarkError(
                f"keyspace {self.keyspace} was resharded: shard(s) {old} became {', '.join(new.shard_names)}. "
                "vitess.stop_on_reshard is set, so streaming stopped there (everything before it is "
                f"delivered). To go on, unset vitess.stop_on_reshard, or start a new connector with "
                f"snapshot.mode: never and vitess.gtid: {new.to_json()}"
            )
        raise SourceUnavailableError(f"VTGate {self.settings.target} ended the VStream")

    def stop(self) -> None:
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()

    def close(self) -> None:
        self.stop()
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self.order.close()

    def committed(self, offset: Mapping[str, Any]) -> None:
        self.order.committed(Vgtid.from_json(offset["source"]["vgtid"]).positions())

    # ------------------------------------------------------------------ the rest of `Source`

    def current_tables(self) -> Mapping[TableId, TableSchema]:
        return self.assembler.tables if self.assembler is not None else {}

    def shaper(self, schema: TableSchema, topic: str, rules: Any, staged: Any = None) -> RowShaper:
        return RowShaper(schema, topic, rules, self.type_mapper(), staged)

    def partitions(self, table: TableId) -> tuple[str | None, ...]:
        """The keyspace's shards, as the stream knows them (all resolved after its first
        events), else as VTGate lists them."""
        known = self.assembler.vgtid.shard_names if self.assembler is not None else ()
        if known and all(known):
            return tuple(sorted(known))
        session = self.chunk_source()
        try:
            return session.shards()
        finally:
            session.close()

    def chunk_source(self) -> VitessSession:
        return VitessSession(self.config)

    def position_watermarks(self) -> Any:
        raise TidemarkError(
            "read.only snapshots need one log position for the whole source; a Vitess keyspace has one per shard"
        )

    def status(self, offset: Mapping[str, Any] | None) -> SourceStatus:
        position = self.describe(offset["source"]) if offset else "none (not started)"
        head = None
        try:
            head = self.describe({"vgtid": self._current_vgtid().to_json()})
        except TidemarkError as exc:
            head = f"unavailable: {exc}"
        return SourceStatus(self.connector_name, position, head, None)

    def _current_vgtid(self, timeout: float = 10.0) -> Vgtid:
        """Every shard's position now: VStream from `current` sends them first."""
        channel = open_channel(self.settings, timeout)
        call = VStreamCall(
            channel, self.settings, for_keyspace(self.keyspace, self.configured_shards, CURRENT)
        )
        try:
            while (response := call.next(timeout)) not in (None, ENDED):
                for event in response.events:
                    if event.vgtid.shard_gtids:
                        vgtid = Vgtid.from_proto(event.vgtid)
                        if all(s.gtid not in (CURRENT, COPY) for s in vgtid.shards):
                            return vgtid
            raise TidemarkError(f"VTGate {self.settings.target} sent no position within {timeout:.0f}s")
        finally:
            call.cancel()
            channel.close()

    def describe(self, position: Mapping[str, Any]) -> str:
        from cdc_core.connectors.vitess.connector import CONNECTOR

        return CONNECTOR.describe_position(position)
