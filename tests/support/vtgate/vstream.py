"""VTGate's merging layer of one VStream call: a tablet stream per shard, their groups
forwarded one at a time, each GTID (and copy progress) turned into a VGTID event that
holds every shard's position; a reshard journal followed onto the new shards (or, with
`stop_on_reshard`, the end of the stream); VTGate's own heartbeats when idle."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import grpc
import pymysql

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate.copy_phase import copy_then_stream
from tests.support.vtgate.shard_stream import Rules, ShardStream, parse_position, position_text, reached
from tests.support.vtgate.topology import Topology

log = logging.getLogger("vtgate.double")
T = bd.VEventType
_server_ids = iter(range(70_000, 2**31))


class StreamError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class VStreamSession:
    def __init__(self, topology: Topology, credentials: dict[str, Any], request: Any, copy_rows: int) -> None:
        self.topology, self.credentials, self.copy_rows = topology, credentials, copy_rows
        self.flags = request.flags
        try:
            self.rules = Rules(list(request.filter.rules))
        except ValueError as exc:
            raise StreamError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        self.vgtid = self._resolve(request.vgtid)
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=64)
        self.stop = threading.Event()
        self.threads: dict[str, threading.Thread] = {}
        self.copying: set[str] = set()
        self.journal_seen: dict[int, set[str]] = {}

    # ------------------------------------------------------------------ the request

    def _resolve(self, vgtid: Any) -> list[Any]:
        if not vgtid.shard_gtids:
            raise StreamError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "vgtid must have at least one value with a starting position",
            )
        resolved = []
        for entry in vgtid.shard_gtids:
            shards = self.topology.load().get(entry.keyspace)
            if shards is None:
                raise StreamError(grpc.StatusCode.FAILED_PRECONDITION, f"keyspace {entry.keyspace} not found")
            if not entry.shard:
                if entry.gtid not in ("current", ""):
                    raise StreamError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"if shards are unspecified, the Gtid value must be 'current' or empty; got: {entry.gtid}",
                    )
                resolved += [
                    bd.ShardGtid(keyspace=entry.keyspace, shard=s.name, gtid=entry.gtid)
                    for s in shards
                    if s.serving
                ]
                continue
            if not any(s.name == entry.shard for s in shards):
                raise StreamError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"shard provided in VGTID, {entry.shard}, not found in the {entry.keyspace} keyspace",
                )
            copied = bd.ShardGtid()
            copied.CopyFrom(entry)
            resolved.append(copied)
        return resolved

    def _params(self, keyspace: str, shard: str) -> dict[str, Any]:
        found = self.topology.shard(keyspace, shard)
        assert found is not None
        return {"host": found.host, "port": found.port, **self.credentials}

    # ------------------------------------------------------------------ shard threads

    def start(self) -> None:
        for entry in list(self.vgtid):
            self._start_shard(entry)

    def _start_shard(self, entry: Any) -> None:
        key = entry.shard
        thread = threading.Thread(target=self._shard, args=(entry,), name=f"shard {key}", daemon=True)
        self.threads[key] = thread
        thread.start()

    def _shard(self, entry: Any) -> None:
        keyspace, shard = entry.keyspace, entry.shard
        try:
            params = self._params(keyspace, shard)
            with pymysql.connect(**params, autocommit=True) as conn, conn.cursor() as cur:
                cur.execute("SELECT @@global.gtid_binlog_pos")
                now = parse_position(cur.fetchone()[0])
            emit = lambda responses: self._put(("group", shard, responses))  # noqa: E731
            if entry.gtid == "current":
                position = now
                self._put(
                    (
                        "group",
                        shard,
                        [[bd.VEvent(type=T.GTID, gtid=position_text(now)), bd.VEvent(type=T.OTHER)]],
                    )
                )
            elif entry.gtid == "" or entry.table_p_ks:
                position = parse_position(entry.gtid) if entry.gtid else {}
            else:
                position = parse_position(entry.gtid)
                if not reached(now, position):
                    raise StreamError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"GTIDSet Mismatch: requested source position:{entry.gtid}, current target vrep position: "
                        f"{position_text(now)}",
                    )
            stream = ShardStream(
                keyspace, shard, params, position, self.rules, emit, self.stop,
                keyspace_heartbeats=self.flags.stream_keyspace_heartbeats, server_id=next(_server_ids),
            )  # fmt: skip
            try:
                if entry.gtid == "" or entry.table_p_ks:
                    self.copying.add(shard)
                    copy_then_stream(stream, entry, self.copy_rows, lambda: self._copied(shard))
                else:
                    stream.run()
            finally:
                stream.close()
        except StreamError as exc:
            self._put(("error", shard, exc))
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            if code == 1236:
                self._put(
                    (
                        "error",
                        shard,
                        StreamError(
                            grpc.StatusCode.UNKNOWN,
                            f"stream (at source tablet) error: {exc.args[-1]} (errno 1236)",
                        ),
                    )
                )
            else:
                self._put(
                    ("error", shard, StreamError(grpc.StatusCode.UNAVAILABLE, f"vttablet: {exc.args[-1]}"))
                )
        except Exception as exc:  # any other fault ends the stream with its text
            log.exception("shard %s stream failed", shard)
            self._put(("error", shard, StreamError(grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}")))

    def _copied(self, shard: str) -> None:
        self.copying.discard(shard)
        done = [bd.VEvent(type=T.COPY_COMPLETED, keyspace=self.vgtid[0].keyspace, shard=shard)]
        self._put(("copied", shard, [done]))

    def _put(self, item: Any) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    # ------------------------------------------------------------------ merging

    def responses(self, context: Any) -> Any:
        self.start()
        idle_since = time.monotonic()
        heartbeat = self.flags.heartbeat_interval
        stopping_at: float | None = None
        try:
            while context.is_active():
                if stopping_at is not None and time.monotonic() >= stopping_at:
                    return  # stop_on_reshard: the stream ends, status OK
                try:
                    kind, shard, responses = self.queue.get(timeout=0.2)
                except queue.Empty:
                    if heartbeat and time.monotonic() - idle_since >= heartbeat:
                        now = time.time()
                        yield bd_response(
                            [bd.VEvent(type=T.HEARTBEAT, timestamp=int(now), current_time=int(now * 1e9))]
                        )
                        idle_since = time.monotonic()
                    continue
                if kind == "error":
                    raise responses
                if kind == "copied":
                    if not self.copying:
                        responses[-1].append(bd.VEvent(type=T.COPY_COMPLETED))
                    yield bd_response(responses[-1])
                    idle_since = time.monotonic()
                    continue
                if shard not in self.threads:
                    continue  # a shard a reshard already replaced
                journal = next((e.journal for r in responses for e in r if e.type == T.JOURNAL), None)
                if journal is not None:
                    sent, stop = self._journal(journal, shard, responses)
                    yield from sent
                    if stop:
                        stopping_at = time.monotonic() + 0.5
                    idle_since = time.monotonic()
                    continue
                for response in responses:
                    yield bd_response([self._vgtid_event(e, shard) for e in response])
                idle_since = time.monotonic()
        finally:
            self.stop.set()

    def _vgtid_event(self, event: Any, shard: str) -> Any:
        if event.type == T.GTID:
            self._update(shard, gtid=event.gtid)
        elif event.type == T.LASTPK:
            self._update(shard, lastpk=event.last_p_k_event)
        else:
            return event
        return bd.VEvent(
            type=T.VGTID, vgtid=bd.VGtid(shard_gtids=self.vgtid), keyspace=event.keyspace, shard=shard
        )

    def _update(self, shard: str, gtid: str | None = None, lastpk: Any = None) -> None:
        entry = next(e for e in self.vgtid if e.shard == shard)
        if gtid is not None:
            entry.gtid = gtid
        if lastpk is not None:
            kept = [t for t in entry.table_p_ks if t.table_name != lastpk.table_last_p_k.table_name]
            if not lastpk.completed:
                kept.append(lastpk.table_last_p_k)
            del entry.table_p_ks[:]
            entry.table_p_ks.extend(kept)

    def _journal(self, journal: Any, shard: str, responses: list[list[Any]]) -> tuple[list[Any], bool]:
        """A reshard reached by one participant: what to send, and whether the stream ends."""
        participants = {p.shard for p in journal.participants}
        seen = self.journal_seen.setdefault(journal.id, set())
        seen.add(shard)
        sent = []
        if self.flags.stop_on_reshard or self.flags.include_reshard_journal_events:
            sent = [bd_response([self._vgtid_event(e, shard) for e in r]) for r in responses]
        if self.flags.stop_on_reshard:
            self.threads.pop(shard, None)  # nothing more from a participant
        if not participants <= seen:
            return sent, False
        if self.flags.stop_on_reshard:
            return sent, True
        for name in participants:  # the switch: the participants give way to the journal's shards
            self.threads.pop(name, None)
        self.vgtid[:] = [e for e in self.vgtid if e.shard not in participants]
        for target in journal.shard_gtids:
            entry = bd.ShardGtid(keyspace=target.keyspace, shard=target.shard, gtid=target.gtid)
            self.vgtid.append(entry)
            self._start_shard(entry)
        return sent, False


def bd_response(events: list[Any]) -> Any:
    from cdc_core.connectors.vitess.generated import vtgate_pb2

    return vtgate_pb2.VStreamResponse(events=events)
