"""VStream's copy phase on one shard (gtid `""`, or copy progress in `table_p_ks`).

As a Vitess tablet does it: the matching tables one at a time in name order, each read
from a consistent snapshot taken under a brief table lock (the position read under the
lock), in batches of rows ordered by primary key; each batch one transaction whose VGTID
carries the last primary key copied (`table_p_ks`); a finished table dropped from it.
Before each table the binlog is streamed up to the new snapshot, for the tables already
copied (catch-up). Then COPY_COMPLETED, and streaming goes on from the last snapshot.
Resuming with `table_p_ks` catches up from its position first and then copies every
matching table again except where `table_p_ks` says how far it got (as Vitess does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import query_pb2 as q
from tests.support.vtgate.fields import table_fields
from tests.support.vtgate.shard_stream import ShardStream, _responses, parse_position, position_text
from tests.support.vtgate.values import copy_text, encode_row

T = bd.VEventType


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def copy_then_stream(stream: ShardStream, entry: Any, batch_rows: int, completed: Callable[[], None]) -> None:
    keyspace = stream.keyspace
    with stream.meta.cursor() as cur:
        cur.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE' "
            "ORDER BY TABLE_NAME",
            (keyspace,),
        )
        tables = [r[0] for r in cur.fetchall() if stream.rules.matches(r[0])]
    resume = {t.table_name: _row_values(t.lastpk.rows[0]) for t in entry.table_p_ks if t.lastpk.rows}
    copied: set[str] = set()
    upto = {table: _typed(stream, table, values) for table, values in resume.items()}

    def rows_copied(table: str, row: tuple[Any, ...]) -> bool:
        """Binlog rows to send: those of tables copied, and of a resumed table's copied part."""
        if table in copied:
            return True
        if table in upto:
            key, last = upto[table]
            return tuple(row[i] for i in key) <= last
        return False

    stream.row_filter = rows_copied
    if stream.position:
        stream.run(until=_now(stream))  # catch-up from the resumed position
    else:
        stream.position = _now(stream)
    for table in tables:
        _copy_table(stream, table, resume.get(table), batch_rows)
        upto.pop(table, None)
        copied.add(table)
    stream.row_filter = None
    completed()
    stream.run()


def _now(stream: ShardStream) -> dict[int, str]:
    with stream.meta.cursor() as cur:
        cur.execute("SELECT @@global.gtid_binlog_pos")
        return parse_position(cur.fetchone()[0])


def _copy_table(stream: ShardStream, table: str, lastpk: list[bytes] | None, batch_rows: int) -> None:
    keyspace = stream.keyspace
    fields = table_fields(stream.meta, keyspace, table)
    if fields is None:
        return
    key = list(fields.primary_key) or list(fields.names)
    key_fields = [f for f in fields.fields if f.name in key]
    lock = pymysql.connect(**stream.params, autocommit=True)
    snap = pymysql.connect(**stream.params, autocommit=True, conv={})
    try:
        with lock.cursor() as lc, snap.cursor() as sc:
            lc.execute(f"LOCK TABLES {_quote(keyspace)}.{_quote(table)} READ")
            sc.execute("SET NAMES binary")
            sc.execute("SET time_zone = '+00:00'")
            sc.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            lc.execute("SELECT @@global.gtid_binlog_pos")
            snapshot = parse_position(lc.fetchone()[0])
            lc.execute("UNLOCK TABLES")
        stream.run(until=snapshot)  # fast-forward the copied tables to this snapshot
        stream.position = dict(snapshot)
        head = [
            bd.VEvent(type=T.BEGIN),
            bd.VEvent(
                type=T.FIELD,
                field_event=bd.FieldEvent(
                    table_name=table, fields=list(fields.fields), enum_set_string_values=True
                ),
            ),
            bd.VEvent(type=T.GTID, gtid=position_text(snapshot)),
        ]
        names = ", ".join(_quote(c) for c in fields.names)
        order = ", ".join(_quote(c) for c in key)
        positions = [fields.names.index(k) for k in key]
        while not stream.stop.is_set():
            where, params = "", []
            if lastpk is not None:
                where = f" WHERE ({order}) > ({', '.join(['%s'] * len(key))})"
                params = lastpk
            with snap.cursor() as sc:
                sc.execute(
                    f"SELECT {names} FROM {_quote(keyspace)}.{_quote(table)}{where} ORDER BY {order} LIMIT {int(batch_rows)}",
                    params,
                )
                rows = sc.fetchall()
            if not rows:
                break
            group = head or [bd.VEvent(type=T.BEGIN)]
            head = []
            for row in rows:
                after = encode_row(tuple(copy_text(v) for v in row))
                group.append(
                    bd.VEvent(
                        type=T.ROW,
                        row_event=bd.RowEvent(table_name=table, row_changes=[bd.RowChange(after=after)]),
                    )
                )
            lastpk = [copy_text(rows[-1][i]) or b"" for i in positions]
            group += [_lastpk(table, key_fields, lastpk, completed=False), bd.VEvent(type=T.COMMIT)]
            stream.emit(_responses(group, keyspace, stream.shard))
        done = head or [bd.VEvent(type=T.BEGIN)]
        done += [_lastpk(table, key_fields, lastpk or [], completed=True), bd.VEvent(type=T.COMMIT)]
        stream.emit(_responses(done, keyspace, stream.shard))
        with snap.cursor() as sc:
            sc.execute("COMMIT")
    finally:
        lock.close()
        snap.close()


def _lastpk(table: str, key_fields: list[Any], values: list[bytes], completed: bool) -> Any:
    fields = [q.Field(name=f.name, type=f.type, charset=f.charset, flags=f.flags) for f in key_fields]
    rows = [encode_row(tuple(values))] if values else []
    last = bd.TableLastPK(table_name=table, lastpk=q.QueryResult(fields=fields, rows=rows))
    return bd.VEvent(type=T.LASTPK, last_p_k_event=bd.LastPKEvent(table_last_p_k=last, completed=completed))


def _typed(stream: ShardStream, table: str, values: list[bytes]) -> tuple[list[int], tuple[Any, ...]]:
    """A resumed table's last copied key as the binlog decoder gives its values (numbers as
    numbers, text as text), with the key columns' positions."""
    fields = table_fields(stream.meta, stream.keyspace, table)
    assert fields is not None
    key = list(fields.primary_key) or list(fields.names)
    positions = [fields.names.index(k) for k in key]
    typed = []
    for i, raw in zip(positions, values, strict=True):
        kind = fields.data_types[i]
        typed.append(
            int(raw) if kind.endswith("int") else raw.decode() if "char" in kind or "text" in kind else raw
        )
    return positions, tuple(typed)


def _row_values(row: Any) -> list[bytes]:
    out, at = [], 0
    for length in row.lengths:
        out.append(row.values[at : at + length] if length >= 0 else b"")
        at += max(length, 0)
    return out
