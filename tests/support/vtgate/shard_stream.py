"""One shard's tablet stream: the shard server's binlog as Vitess's vstreamer turns it into
VEvents, grouped as VTGate forwards them (a transaction, a DDL, anything else).

A group is handed on whole once it is complete (after its COMMIT), split into responses
of about 250 KB of row data, so a reader never sees part of a transaction. GTID events
carry the shard's whole position after the group (`MariaDB/<domain>-<server>-<seq>`),
which the merging layer turns into VGTID events. A transaction touching no table the
filter matches is still sent, empty; rows of other databases produce nothing.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_core.connectors.mysql.binlog_decoder import _repairs, _values
from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import query_pb2 as q
from tests.support.vtgate.fields import TableFields, table_fields
from tests.support.vtgate.values import binlog_text, encode_row

log = logging.getLogger("vtgate.double")

T = bd.VEventType
PACKET_BYTES = 250_000
_DDL = re.compile(r"^\s*(/\*.*?\*/\s*)*(CREATE|ALTER|DROP|RENAME|TRUNCATE)\s+TABLE\b", re.I | re.S)
_TABLE = re.compile(r"TABLE\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?:`?[\w$]+`?\.)?`?([\w$]+)`?", re.I)
STANDALONE = 1  # MariaDB GTID flag: a statement with no COMMIT of its own (DDL)


class Rules:
    """A VStream filter: rules `match` a bare table name (exact, or `/regex` unanchored)."""

    def __init__(self, rules: list[Any]) -> None:
        self.rules = [(r.match, r.filter) for r in rules] or [("/.*", "")]
        for _match, filter_ in self.rules:
            text = filter_.strip().lower()
            if text and not re.fullmatch(r"select \* from `?[\w$]+`?", text):
                raise ValueError(
                    f"the VTGate double supports only filters '' and 'select * from t', not {filter_!r}"
                )

    def matches(self, table: str) -> bool:
        for match, _ in self.rules:
            if match.startswith("/"):
                if re.search(match.strip("/"), table):
                    return True
            elif match == table:
                return True
        return False


def position_text(gtids: dict[int, str]) -> str:
    return "MariaDB/" + ",".join(gtids[d] for d in sorted(gtids))


def parse_position(text: str) -> dict[int, str]:
    body = text.split("/", 1)[-1]
    return {int(g.split("-")[0]): g for g in body.split(",") if g}


def reached(position: dict[int, str], target: dict[int, str]) -> bool:
    """Whether `position` includes every domain's sequence of `target`."""
    for domain, gtid in target.items():
        have = position.get(domain)
        if have is None or int(have.split("-")[2]) < int(gtid.split("-")[2]):
            return False
    return True


class ShardStream:
    """Reads one shard's binlog from a position and hands complete groups to `emit`."""

    def __init__(
        self,
        keyspace: str,
        shard: str,
        params: dict[str, Any],
        position: dict[int, str],
        rules: Rules,
        emit: Callable[[list[list[Any]]], None],
        stop: threading.Event,
        keyspace_heartbeats: bool = False,
        server_id: int = 0,
    ) -> None:
        self.keyspace, self.shard, self.params = keyspace, shard, params
        self.position = dict(position)
        self.rules, self.emit, self.stop = rules, emit, stop
        self.keyspace_heartbeats = keyspace_heartbeats
        self.server_id = server_id
        self.meta = pymysql.connect(**params, autocommit=True)
        self._fields: dict[str, TableFields] = {}
        self._sent: set[str] = set()  # tables whose FIELD this stream sent
        self.row_filter: Callable[[str, tuple[Any, ...]], bool] | None = None  # copy phase: ranges done

    # ------------------------------------------------------------------ reading

    def run(self, until: dict[int, str] | None = None) -> None:
        """Stream until stopped, or (catch-up) until `until` is reached."""
        kwargs: dict[str, Any] = {"auto_position": ",".join(self.position.values())} if self.position else {}
        reader = BinLogStreamReader(
            connection_settings={**self.params},
            server_id=self.server_id,
            blocking=until is None,
            is_mariadb=True,
            slave_heartbeat=0.5,
            only_events=[
                MariadbGtidEvent,
                QueryEvent,
                XidEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
            ],
            only_schemas=[self.keyspace, "_vt"],
            enable_logging=False,
            **kwargs,
        )
        group: list[Any] | None = None
        gtid = ""
        standalone = False
        try:
            for event in reader:
                if self.stop.is_set():
                    return
                if isinstance(event, MariadbGtidEvent):
                    gtid, standalone = event.gtid, bool(event.flags & STANDALONE)
                    if until is not None and reached(self.position, until):
                        return
                    group = [] if standalone else [bd.VEvent(type=T.BEGIN, timestamp=event.timestamp)]
                elif isinstance(event, QueryEvent):
                    query = event.query.decode() if isinstance(event.query, bytes) else event.query
                    if query.strip().upper() == "BEGIN":
                        continue
                    if query.strip().upper() == "COMMIT" and group is not None:
                        self._end(group, gtid, event.timestamp)
                        group = None
                    elif standalone:
                        self._statement(query, _schema(event), gtid, event.timestamp)
                        group = None
                elif isinstance(event, XidEvent) and group is not None:
                    self._end(group, gtid, event.timestamp)
                    group = None
                elif group is not None:
                    self._rows(event, group)
        finally:
            reader.close()

    def _end(self, group: list[Any], gtid: str, timestamp: int) -> None:
        self._advance(gtid)
        group += [
            bd.VEvent(type=T.GTID, gtid=position_text(self.position)),
            bd.VEvent(type=T.COMMIT, timestamp=timestamp),
        ]
        self.emit(_responses(group, self.keyspace, self.shard))

    def _statement(self, query: str, schema: str, gtid: str, timestamp: int) -> None:
        self._advance(gtid)
        kind = T.OTHER
        if schema == self.keyspace and _DDL.match(query):
            found = _TABLE.search(query)
            table = found.group(1) if found else ""
            if not found or self.rules.matches(table):
                kind = T.DDL
            self._fields.pop(table, None)  # its next ROW goes with a new FIELD
            self._sent.discard(table)
        position = bd.VEvent(type=T.GTID, gtid=position_text(self.position))
        statement = bd.VEvent(type=kind, timestamp=timestamp, statement=query if kind == T.DDL else "")
        self.emit(_responses([position, statement], self.keyspace, self.shard))

    def _advance(self, gtid: str) -> None:
        self.position[int(gtid.split("-")[0])] = gtid

    # ------------------------------------------------------------------ rows

    def _rows(self, event: Any, group: list[Any]) -> None:
        schema, table = event.schema, event.table
        internal = schema == "_vt"
        if internal:
            if table == "resharding_journal" and isinstance(event, WriteRowsEvent):
                for row in event.rows:
                    group.append(journal_event(row["values"]["val"]))
                return
            if table != "heartbeat" or not self.keyspace_heartbeats:
                return
            mine = f"{self.keyspace}:".encode()  # this server's rows of this keyspace only
            rows = [r for r in event.rows if _heartbeat_key(r).startswith(mine)]
            if not rows:
                return
        elif schema != self.keyspace or not self.rules.matches(table):
            return
        fields = self._table(schema, table, event)
        if table not in self._sent:
            self._sent.add(table)
            group.append(
                bd.VEvent(
                    type=T.FIELD,
                    field_event=bd.FieldEvent(
                        table_name=table,
                        fields=list(fields.fields),
                        enum_set_string_values=any(t in ("enum", "set") for t in fields.data_types),
                        is_internal_table=internal,
                    ),
                )
            )
        repairs = _repairs(event.columns)
        changes = []
        for row in event.rows:
            if isinstance(event, UpdateRowsEvent):
                before = _values(row["before_values"], row["before_none_sources"], repairs)
                after = _values(row["after_values"], row["after_none_sources"], repairs)
            elif isinstance(event, WriteRowsEvent):
                before, after = None, _values(row["values"], row["none_sources"], repairs)
            else:
                before, after = _values(row["values"], row["none_sources"], repairs), None
            if self.row_filter is not None and not self.row_filter(table, after or before):
                continue
            changes.append(
                bd.RowChange(
                    before=self._encode(fields, before) if before is not None else None,
                    after=self._encode(fields, after) if after is not None else None,
                )
            )
        if changes:
            group.append(
                bd.VEvent(
                    type=T.ROW,
                    timestamp=event.timestamp,
                    row_event=bd.RowEvent(
                        table_name=table, row_changes=changes, flags=1, is_internal_table=internal
                    ),
                )
            )

    def _table(self, schema: str, table: str, event: Any) -> TableFields:
        found = self._fields.get(table)
        if found is None or found.names != tuple(c.name for c in event.columns):
            found = table_fields(self.meta, schema, table)
            if found is None or found.names != tuple(c.name for c in event.columns):
                raise RuntimeError(f"the columns of {schema}.{table} changed since this binlog event")
            self._fields[table] = found
            self._sent.discard(table)
        return found

    @staticmethod
    def _encode(fields: TableFields, values: tuple[Any, ...]) -> Any:
        return encode_row(
            tuple(
                binlog_text(v, t, w)
                for v, t, w in zip(values, fields.data_types, fields.lengths, strict=True)
            )
        )

    def close(self) -> None:
        self.meta.close()


def _heartbeat_key(row: dict[str, Any]) -> bytes:
    values = row.get("after_values") or row.get("values") or {}
    key = values.get("keyspaceShard") or b""
    return key if isinstance(key, bytes) else str(key).encode()


def journal_event(value: Any) -> Any:
    from google.protobuf import text_format

    text = value.decode() if isinstance(value, (bytes, bytearray)) else value
    return bd.VEvent(type=T.JOURNAL, journal=text_format.Parse(text, bd.Journal()))


def _schema(event: Any) -> str:
    schema = event.schema
    return schema.decode() if isinstance(schema, (bytes, bytearray)) else (schema or "")


def _responses(group: list[Any], keyspace: str, shard: str) -> list[list[Any]]:
    """A group as VTGate sends it: every event stamped with its shard, FIELD and ROW table
    names qualified with the keyspace, split into responses of about PACKET_BYTES rows."""
    responses: list[list[Any]] = [[]]
    size = 0
    for event in group:
        event.keyspace, event.shard = keyspace, shard
        if event.type == T.FIELD:
            event.field_event.table_name = f"{keyspace}.{event.field_event.table_name}"
            event.field_event.keyspace, event.field_event.shard = keyspace, shard
        elif event.type == T.ROW:
            event.row_event.table_name = f"{keyspace}.{event.row_event.table_name}"
            event.row_event.keyspace, event.row_event.shard = keyspace, shard
            size += event.row_event.ByteSize()
            if size > PACKET_BYTES and responses[-1]:
                responses.append([])
                size = event.row_event.ByteSize()
        responses[-1].append(event)
    return responses


# query.Row for the double's own use (copy phase and lastpk) re-exported for its modules
Row = q.Row
