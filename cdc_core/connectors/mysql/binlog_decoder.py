"""Binlog decoding in a child process, so parsing runs in parallel with the pipeline.

Decoding row images in python-mysql-replication is pure Python and costs more per row
than everything the pipeline does afterwards; in one process the two share one GIL and
the streamer can only be as fast as their sum. The reader therefore runs the library in
a child process that turns each event into a small tuple (below) and sends them to the
parent in batches over a pipe. The parent keeps all state that matters (positions, GTIDs,
the schema timeline, transactions), so the child can be killed at any moment: the
streamer restarts it from its committed offset, exactly as after a lost connection. Stop
signals are the parent's alone (the child ignores them; the parent kills it when done).

Row events of tables that are not captured are dropped in the child without decoding
their rows. A full pipe blocks the child: backpressure reaches the server socket, and
memory stays bounded.

Records (plain tuples, cheap to pickle):
    (ROTATE, next_binlog)
    (HEARTBEAT, log_pos)
    (ROWS, op, schema, table, column_names, timestamp, start_pos, log_pos, rows, error)
        rows: value tuples; for updates (before, after) pairs; None when decoding failed
    (MARIADB_GTID, gtid, flags, timestamp, start_pos)
    (MYSQL_GTID, gtid, timestamp, start_pos)
    (QUERY, query, schema, thread_id, timestamp, start_pos, log_pos)
    (XID, timestamp, log_pos)
    (XA_PREPARE, timestamp, log_pos, one_phase, gtrid): the end of an XA transaction's
        prepared part (or of the whole of one committed in one phase)
    (UNREADABLE, event_type, start_pos, log_pos): an event that may hold changes and that
        python-mysql-replication does not read (it would drop it without a word)

A statement-logged LOAD DATA (EXECUTE_LOAD_QUERY) comes as a QUERY with its statement, and
a MySQL partial JSON update (PARTIAL_UPDATE_ROWS) as a ROWS record whose decoding failed:
both are changes the parent must refuse or skip aloud, never miss.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    ExecuteLoadQueryEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc_core.connectors.mysql.compressed_events import BinlogConnection, size_in_file
from cdc_core.connectors.mysql.decoder_repairs import repaired, repairs_for
from cdc_core.events.envelope import OP_CREATE, OP_DELETE, OP_UPDATE
from cdc_core.schema.model import TableId

ROTATE, HEARTBEAT, ROWS, MARIADB_GTID, MYSQL_GTID, QUERY, XID, XA_PREPARE, UNREADABLE = range(9)

# Messages from the child.
STARTED, EVENTS, FAILED = "started", "events", "failed"

# Signals for the parent alone, even when sent to the whole process group.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}

BATCH_EVENTS = 256
BATCH_SECONDS = 0.05


class _OneConnection:
    """Connection factory that refuses to reconnect: python-mysql-replication would resume
    silently from where *it* thinks it is, behind the pipeline's back."""

    def __init__(self) -> None:
        self.opened = 0

    def __call__(self, **kwargs: Any) -> Any:
        self.opened += 1
        if self.opened > 2:  # one control connection and one stream connection
            raise ConnectionResetError("lost the connection to the database")
        return BinlogConnection(**kwargs)


def _die_with_parent() -> None:
    """After `kill -9` of the streamer nothing would stop this process otherwise."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(0)


def run(conn: Connection, reader_kwargs: dict[str, Any], tables: Any, signal_table: str | None) -> None:
    """Child process entry point."""
    _die_with_parent()
    # The parent decides when we stop: a SIGINT or SIGTERM sent to the whole process group
    # is for it, and it stops us once it has shut down in order. It started us with them
    # blocked, so one that arrived before this point is pending, and now discarded.
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        stream = _open(reader_kwargs)
        first = stream.fetchone()
    except BaseException as exc:
        _send_failure(conn, exc)
        return
    conn.send((STARTED,))
    try:
        _pump(conn, stream, first, tables, signal_table)
    except (BrokenPipeError, EOFError, OSError) as exc:
        if isinstance(exc, (BrokenPipeError, EOFError)) or exc.errno == 32:
            return  # the parent went away or closed the pipe
        _send_failure(conn, exc)
    except BaseException as exc:
        _send_failure(conn, exc)
    finally:
        with contextlib.suppress(Exception):
            stream.close()


# What the child reads; every other known type holds no change it needs.
EVENTS = [
    MariadbGtidEvent,
    GtidEvent,
    QueryEvent,
    XidEvent,
    XAPrepareEvent,
    RotateEvent,
    HeartbeatLogEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    ExecuteLoadQueryEvent,
    NotImplementedEvent,  # every event type the library does not know
]


def _open(kwargs: dict[str, Any]) -> Any:
    return BinLogStreamReader(
        **kwargs,
        blocking=True,
        slave_heartbeat=1.0,
        only_events=EVENTS,
        pymysql_wrapper=_OneConnection(),
        enable_logging=False,
    )


def _send_failure(conn: Connection, exc: BaseException) -> None:
    import pymysql

    if isinstance(exc, pymysql.err.OperationalError):
        kind = "operational"
    elif isinstance(exc, (pymysql.err.InterfaceError, ConnectionError)):
        kind = "connection"
    else:
        kind = type(exc).__name__
    args = tuple(a if isinstance(a, (int, str)) else str(a) for a in exc.args)
    with contextlib.suppress(Exception):
        conn.send((FAILED, kind, args, str(exc)))


def _pump(conn: Connection, stream: Any, first: Any, tables: Any, signal_table: str | None) -> None:
    ops = {
        WriteRowsEvent: OP_CREATE,
        UpdateRowsEvent: OP_UPDATE,
        PartialUpdateRowsEvent: OP_UPDATE,
        DeleteRowsEvent: OP_DELETE,
    }
    names_cache: dict[int, tuple[int, tuple[str | None, ...], Any]] = {}
    wanted: dict[tuple[str, str], bool] = {}
    batch: list[tuple[Any, ...]] = []
    started = time.monotonic()
    event = first
    while True:
        if event is None:
            event = stream.fetchone()
            if event is None:
                continue
        kind = type(event)
        op = ops.get(kind)
        if op is not None:
            key = (event.schema, event.table)
            keep = wanted.get(key)
            if keep is None:
                keep = wanted[key] = tables.captures(TableId(*key)) or f"{key[0]}.{key[1]}" == signal_table
            if keep:
                batch.append(_rows(event, op, names_cache))
        elif kind is HeartbeatLogEvent:
            batch.append((HEARTBEAT, stream.log_pos))
            conn.send((EVENTS, batch))
            batch, started = [], time.monotonic()
        elif kind is RotateEvent:
            batch.append((ROTATE, event.next_binlog))
        elif kind is MariadbGtidEvent:
            batch.append((MARIADB_GTID, event.gtid, event.flags, event.timestamp, _start(event)))
        elif kind is GtidEvent:
            batch.append((MYSQL_GTID, event.gtid, event.timestamp, _start(event)))
        elif kind is QueryEvent or kind is ExecuteLoadQueryEvent:
            query, schema = (event.query, event.schema) if kind is QueryEvent else _load_statement(event)
            schema = schema.decode() if isinstance(schema, bytes) else schema
            batch.append(
                (QUERY, query, schema, event.slave_proxy_id, event.timestamp, _start(event), stream.log_pos)
            )
        elif kind is XidEvent:
            batch.append((XID, event.timestamp, stream.log_pos))
        elif kind is XAPrepareEvent:
            batch.append(
                (XA_PREPARE, event.timestamp, stream.log_pos, event.one_phase, bytes(event.xid_gtrid))
            )
        elif kind is NotImplementedEvent and event.event_type not in WITHOUT_CHANGES:
            batch.append((UNREADABLE, event.event_type, _start(event), event.packet.log_pos))
        event = None
        if len(batch) >= BATCH_EVENTS or (batch and time.monotonic() - started > BATCH_SECONDS):
            conn.send((EVENTS, batch))
            batch, started = [], time.monotonic()


# Event types python-mysql-replication does not read (it gives them as NotImplementedEvent)
# that hold no change of a row: GTID bookkeeping, group replication's certification
# context and view changes, MySQL 8's second heartbeat, ignorable events.
WITHOUT_CHANGES = frozenset({0x1C, 0x22, 0x24, 0x25, 0x29})
# Those that may, named for the message that stops (or warns on) them.
_UNREADABLE = {
    0x1A: "an incident event: the server says changes may be missing from the binlog after it (a failed "
    "write, or a LOST_EVENTS incident); check its error log, then re-snapshot the captured tables",
    0x28: "a compressed transaction (TRANSACTION_PAYLOAD: MySQL 8's binlog_transaction_compression=ON), "
    "whose row events this streamer does not read: set binlog_transaction_compression=OFF for every writer",
    0x2A: "a tagged GTID (GTID_TAGGED_LOG: MySQL 8.3+), which this streamer does not read",
}


def unreadable(event_type: int) -> str:
    """What an UNREADABLE record's event is, and what to do about it."""
    return _UNREADABLE.get(
        event_type, f"an event of type {event_type:#04x}, which this streamer does not know and cannot read"
    )


def _load_statement(event: Any) -> tuple[str, bytes]:
    """A statement-logged LOAD DATA's statement and default database, which the library
    leaves unread: its event is a query event with 13 more bytes of post-header."""
    packet = event.packet
    packet.read(event.status_vars_length)
    schema = packet.read(event.schema_length)
    packet.read(1)
    length = event.event_size - 26 - event.status_vars_length - event.schema_length - 1
    return packet.read(length).decode("utf-8", errors="backslashreplace"), schema


def _start(event: Any) -> int:
    """Where the event starts in its binlog file: the next event's position minus the
    event's whole size (header and checksum included) as the file holds it."""
    return event.packet.log_pos - size_in_file(event.packet.packet, event.packet.event_size)


def _rows(
    event: Any, op: str, names_cache: dict[int, tuple[int, tuple[str | None, ...], Any]]
) -> tuple[Any, ...]:
    cached = names_cache.get(event.table_id)
    if cached is None or cached[0] != id(event.columns):
        # One tuple object per table map: pickle sends it once per batch.
        cached = names_cache[event.table_id] = (
            id(event.columns),
            tuple(c.name for c in event.columns),
            repairs_for(event.columns),
        )
    repairs = cached[2]
    try:
        if type(event) is PartialUpdateRowsEvent:
            raise PartialRowImage(
                "it is a partial JSON update, which holds only the JSON columns' changes, not their values: "
                "the session that wrote it set binlog_row_value_options=PARTIAL_JSON, and whole values are "
                "needed (binlog_row_value_options='' for every writer). event.processing.failure.handling.mode"
                "=warn skips such events; an incremental snapshot of the table then re-reads its rows"
            )
        absent = _absent(event, op)
        if absent:
            raise PartialRowImage(
                f"its row images lack columns {absent}: the session that wrote it set binlog_row_image="
                "MINIMAL or NOBLOB, and whole rows are needed (binlog_row_image=FULL for every writer). "
                "event.processing.failure.handling.mode=warn skips such events; an incremental snapshot of "
                "the table then re-reads its rows (a row such an event deleted stays until deleted again)"
            )
        rows = event.rows
        if op == OP_UPDATE:
            decoded: list[Any] = [
                (
                    repaired(r["before_values"], r["before_none_sources"], repairs),
                    repaired(r["after_values"], r["after_none_sources"], repairs),
                )
                for r in rows
            ]
        else:
            decoded = [repaired(r["values"], r["none_sources"], repairs) for r in rows]
        error = None
    except Exception as exc:
        decoded, error = None, f"{type(exc).__name__}: {exc}"
    return (
        ROWS,
        op,
        event.schema,
        event.table,
        cached[1],
        event.timestamp,
        _start(event),
        event.packet.log_pos,
        decoded,
        error,
    )


class PartialRowImage(Exception):
    """A row event without every column's value (a session's binlog_row_image=MINIMAL or
    NOBLOB, or binlog_row_value_options=PARTIAL_JSON)."""


_FULL: dict[int, bytes] = {}


def _absent(event: Any, op: str) -> list[str]:
    """The columns a row event's images leave out: python-mysql-replication reads them as
    NULL, which would be emitted as values the rows do not have."""
    width = len(event.columns)
    full = _FULL.get(width)
    if full is None:
        full = _FULL[width] = ((1 << width) - 1).to_bytes((width + 7) // 8, "little")
    maps = [event.columns_present_bitmap]
    if op == OP_UPDATE:
        maps.append(event.columns_present_bitmap2)
    if all(m == full for m in maps):
        return []
    return [c.name for i, c in enumerate(event.columns) if any(not (m[i // 8] >> (i % 8)) & 1 for m in maps)]
