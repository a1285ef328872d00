"""VTGate's merging layer for one VStream call (`vtgate/vstream_manager.go`).

A thread per shard runs that shard's tablet stream (`tablet.py`) and treats each tablet
batch as VTGate does: FIELD and ROW get `table_name = "<keyspace>.<table>"`; events pile
up until COMMIT, DDL, OTHER or COPY_COMPLETED, and the whole group is then sent under
one lock, each tablet batch as one response, so shards interleave only at transaction
boundaries and a transaction is never delivered in part. While sending, each GTID and
LASTPK becomes a VGTID event holding the full VGTID of the stream (every shard's
position and copy progress), timestamp 0. Tablet heartbeats are dropped; VTGate sends
its own HEARTBEAT after `heartbeat_interval` seconds with nothing sent. When every shard
of the stream has finished copying, the last COPY_COMPLETED is followed by a bare one.

A reshard journal (`_vt.resharding_journal`) is followed as VTGate does: each participant
stream waits until all have reached it; then, by default, the participants leave the
VGTID and the journal's target shards join at its end and stream from the journal's
positions. With `include_reshard_journal_events` each participant also sends
`[BEGIN, JOURNAL, VGTID, COMMIT]`; with `stop_on_reshard` it sends that, keeps the shard
list, waits at least 500 ms and ends: the call ends with status OK once no stream is left.

The first error of any shard ends the call with its gRPC code and message."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import text_format

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import vtgate_pb2
from tests.support.vtgate.errors import VStreamError
from tests.support.vtgate.request import check_shards, resolve_vgtid
from tests.support.vtgate.rules import Rules
from tests.support.vtgate.shard_context import ShardContext
from tests.support.vtgate.tablet import TabletStream
from tests.support.vtgate.topology import Topology

log = logging.getLogger("vtgate.double")
T = bd.VEventType
_STOP_ON_RESHARD_DELAY = 0.5  # seconds a stopping participant waits (`stopOnReshardDelay`)


@dataclass(frozen=True)
class StreamSettings:
    """The double's process-wide settings for tablet streams."""

    credentials: dict[str, Any]  # the tablets' own login on the shard servers
    packet_size: int = 250_000
    copy_rows: int = 10_000


class _Ended(Exception):
    """A shard stream's quiet end (journal, stop, or another shard's error)."""


@dataclass
class _Journal:
    journal: Any
    participants: dict[int, list[Any]]  # id(ShardGtid) -> [ShardGtid, joined]
    done: threading.Event


class VStreamSession:
    """One VStream call: resolves the request, runs the shard streams, yields responses."""

    def __init__(self, topology: Topology, settings: StreamSettings, request: Any) -> None:
        self.topology, self.settings = topology, settings
        self.flags = request.flags
        self.rules = Rules(list(request.filter.rules))
        self.vgtid = resolve_vgtid(topology, request.vgtid)
        self.lock = threading.Lock()  # the sending lock: one group at a time
        self.out: queue.Queue[list[Any]] = queue.Queue(maxsize=16)
        self.stop = threading.Event()
        self.error: VStreamError | None = None
        self._active = 0
        self._active_lock = threading.Lock()
        self._journals: dict[int, _Journal] = {}
        self._copied: set[str] = set()
        # Shards starting at `current` announce their position once every one of them is
        # connected to its binlog, so that a client writing as soon as it has the positions
        # sees its writes streamed promptly on every shard (VTGate gives no order across
        # shards; this keeps the double from adding start-up skew of its own).
        starting = sum(1 for e in self.vgtid if e.gtid == "current")
        self._start_gate = threading.Barrier(max(starting, 1), timeout=10)

    # ------------------------------------------------------------------ the call

    def responses(self, context: Any) -> Iterator[Any]:
        for entry in list(self.vgtid):
            self._start(entry)
        interval = self.flags.heartbeat_interval
        last_sent = time.monotonic()
        try:
            while context.is_active():
                if self.error is not None:
                    raise self.error
                try:
                    events = self.out.get(timeout=0.1)
                except queue.Empty:
                    if self._active == 0 and self.out.empty() and self.error is None:
                        return  # every stream ended (stop_on_reshard): status OK
                    if interval and time.monotonic() - last_sent >= interval:
                        now = time.time_ns()
                        yield vtgate_pb2.VStreamResponse(
                            events=[bd.VEvent(type=T.HEARTBEAT, timestamp=now // 10**9, current_time=now)]
                        )
                        last_sent = time.monotonic()
                    continue
                yield vtgate_pb2.VStreamResponse(events=events)
                last_sent = time.monotonic()
        finally:
            self.stop.set()

    def _start(self, entry: Any) -> None:
        with self._active_lock:
            self._active += 1
        name = f"vstream {entry.keyspace}/{entry.shard}"
        threading.Thread(target=self._stream, args=(entry,), name=name, daemon=True).start()

    def _gate(self) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):  # a shard failed or is slow
            self._start_gate.wait()

    def _fail(self, error: VStreamError) -> None:
        if self.error is None:
            self.error = error
        self.stop.set()
        self._start_gate.abort()

    # ------------------------------------------------------------------ one shard

    def _stream(self, entry: Any) -> None:
        try:
            check_shards(self.topology, entry.keyspace, self.vgtid)
            found = self.topology.shard(entry.keyspace, entry.shard)
            assert found is not None
            shard = ShardContext(
                keyspace=entry.keyspace,
                shard=entry.shard,
                params={"host": found.host, "port": found.port, **self.settings.credentials},
                rules=self.rules,
                stop=self.stop,
                packet_size=self.settings.packet_size,
                copy_rows=self.settings.copy_rows,
            )
            internal = frozenset({"heartbeat"}) if self.flags.stream_keyspace_heartbeats else frozenset()
            gate = self._gate if entry.gtid == "current" else (lambda: None)
            tablet = TabletStream(shard, entry.gtid, list(entry.table_p_ks), internal, gate)
            tablet.run(_Batches(self, entry).receive)
        except _Ended:
            pass
        except VStreamError as exc:
            log.info("vstream %s/%s: %s", entry.keyspace, entry.shard, exc.message)
            self._fail(exc)
        except Exception as exc:  # an unexpected fault ends the call with its text
            log.exception("vstream %s/%s failed", entry.keyspace, entry.shard)
            self._fail(VStreamError(grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}"))
        finally:
            with self._active_lock:
                self._active -= 1

    def send_all(self, entry: Any, groups: list[list[Any]]) -> None:
        """`vstream.sendAll`: a group's responses, GTID/LASTPK made VGTIDs, under the lock."""
        with self.lock:
            for events in groups:
                if self.error is not None or self.stop.is_set():
                    raise _Ended
                for i, event in enumerate(events):
                    if event.type == T.GTID:
                        entry.gtid = event.gtid
                    elif event.type == T.LASTPK:
                        _track_lastpk(entry, event.last_p_k_event)
                    else:
                        continue
                    events[i] = bd.VEvent(
                        type=T.VGTID,
                        vgtid=bd.VGtid(shard_gtids=self.vgtid),
                        keyspace=event.keyspace,
                        shard=event.shard,
                    )
                while True:
                    try:
                        self.out.put(events, timeout=0.2)
                        break
                    except queue.Full:
                        if self.stop.is_set():
                            raise _Ended from None

    def copy_completed(self, event: Any) -> bool:
        """Records a shard's COPY_COMPLETED; True once every shard of the stream has one."""
        with self.lock:
            self._copied.add(f"{event.keyspace}/{event.shard}")
            return all(f"{e.keyspace}/{e.shard}" in self._copied for e in self.vgtid)

    # ------------------------------------------------------------------ reshard

    def join_journal(self, entry: Any, journal: Any) -> threading.Event | None:
        """`vstream.getJournalEvent`: the event to wait on, or None when not a participant."""
        if journal.migration_type == bd.TABLES:
            return None
        with self.lock:
            found = self._journals.get(journal.id)
            if found is None:
                participants: dict[int, list[Any]] = {}
                mode = ""
                for jks in journal.participants:
                    inner = next(
                        (s for s in self.vgtid if s.keyspace == jks.keyspace and s.shard == jks.shard), None
                    )
                    seen = "all" if inner is not None else "none"
                    if mode and mode != seen:
                        raise VStreamError(
                            grpc.StatusCode.UNKNOWN,
                            f"not all journaling participants are in the stream: journal: "
                            f"{_go_list(journal.participants)}, stream: {_go_list(self.vgtid)}",
                        )
                    mode = seen
                    if inner is not None:
                        participants[id(inner)] = [inner, False]
                if mode != "all":
                    return None
                found = _Journal(journal, participants, threading.Event())
                self._journals[journal.id] = found
            if id(entry) not in found.participants:
                return None
            found.participants[id(entry)][1] = True
            if not all(joined for _, joined in found.participants.values()):
                return found.done
            if not self.flags.stop_on_reshard:  # the participants give way to the targets
                kept = [s for s in self.vgtid if id(s) not in found.participants]
                for target in found.journal.shard_gtids:
                    added = bd.ShardGtid()
                    added.CopyFrom(target)
                    kept.append(added)
                    self._start(added)
                self.vgtid[:] = kept
            found.done.set()
            return found.done


class _Batches:
    """VTGate's handling of one shard stream's tablet batches (`streamFromTablet`)."""

    def __init__(self, session: VStreamSession, entry: Any) -> None:
        self.session, self.entry = session, entry
        self.groups: list[list[Any]] = []
        self.pending: list[Any] = []

    def receive(self, events: list[Any]) -> None:
        session, entry = self.session, self.entry
        if session.stop.is_set():
            raise _Ended
        for i, event in enumerate(events):
            kind = event.type
            if kind in (T.FIELD, T.ROW):
                clone = bd.VEvent()
                clone.CopyFrom(event)
                inner = clone.field_event if kind == T.FIELD else clone.row_event
                inner.table_name = f"{entry.keyspace}.{inner.table_name}"
                self.pending.append(clone)
            elif kind in (T.COMMIT, T.DDL, T.OTHER):
                self.pending.append(event)
                self._send()
            elif kind == T.COPY_COMPLETED:
                self.pending.append(event)
                if session.copy_completed(event):
                    self.pending.append(bd.VEvent(type=T.COPY_COMPLETED))
                self._send()
            elif kind == T.HEARTBEAT:
                continue
            elif kind == T.JOURNAL:
                self._journal(event, events[i + 1 :])
            else:
                self.pending.append(event)
        if self.pending:
            self.groups.append(self.pending)
            self.pending = []

    def _send(self) -> None:
        self.groups.append(self.pending)
        groups, self.groups, self.pending = self.groups, [], []
        self.session.send_all(self.entry, groups)

    def _journal(self, event: Any, rest: list[Any]) -> None:
        session = self.session
        flags = session.flags
        shards = event.journal.migration_type == bd.SHARDS
        if (flags.include_reshard_journal_events or flags.stop_on_reshard) and shards:
            self.pending.append(event)
            for later in rest:
                self.pending.append(later)
                if later.type == T.COMMIT:
                    break
            self._send()
        done = session.join_journal(self.entry, event.journal)
        if done is None:
            return
        until = time.monotonic() + _STOP_ON_RESHARD_DELAY
        while not done.wait(0.2):
            if session.stop.is_set():
                raise _Ended
        if flags.stop_on_reshard:
            time.sleep(max(0.0, until - time.monotonic()))
        raise _Ended  # this participant's stream ends; the targets' streams take over


def _track_lastpk(entry: Any, progress: Any) -> None:
    """A shard's copy progress (`table_p_ks`) after a LASTPK, as `sendAll` keeps it."""
    tables = list(entry.table_p_ks)
    name = progress.table_last_p_k.table_name
    at = next((i for i, t in enumerate(tables) if t.table_name == name), -1)
    if at < 0:
        if not progress.completed:
            tables.append(progress.table_last_p_k)
    elif progress.completed:
        tables[at] = tables[-1]  # removed by swapping in the last one, as Vitess does
        tables.pop()
    else:
        tables[at] = progress.table_last_p_k
    kept = [bd.TableLastPK(table_name=t.table_name, lastpk=t.lastpk) for t in tables]
    del entry.table_p_ks[:]
    entry.table_p_ks.extend(kept)


def _go_list(messages: Any) -> str:
    return "[" + " ".join(text_format.MessageToString(m, as_one_line=True) for m in messages) + "]"
