"""The VTGate test double (tests/support/vtgate) against Vitess 21's wire behaviour, driven
only as a client drives VTGate: VStream through grpcio (the generated stubs) and the MySQL
protocol through pymysql. Shard servers: `python -m scripts.services up vitess`."""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pymysql
import pytest

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import query_pb2 as q
from cdc_core.connectors.vitess.generated import vtgate_pb2, vtgateservice_pb2_grpc
from tests.support.vtgate.cluster import VitessCluster
from tests.support.vtgate.fixture import shard_admin, shard_server_ports
from tests.support.vtgate.writes import Delete, Insert, Update

pytestmark = pytest.mark.integration
T = bd.VEventType


class Stream:
    """A VStream call read on a thread: responses queue up, the end (or error) is kept."""

    def __init__(
        self, cluster: VitessCluster, vgtid: Any, rules: list[Any] | None = None, **flags: Any
    ) -> None:
        self.channel = grpc.insecure_channel(cluster.grpc_address)
        request = vtgate_pb2.VStreamRequest(
            vgtid=vgtid, filter=bd.Filter(rules=rules or []), flags=vtgate_pb2.VStreamFlags(**flags)
        )
        self.call = vtgateservice_pb2_grpc.VitessStub(self.channel).VStream(request)
        self.responses: queue.Queue[Any] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self.ended = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self.responses.put(list(response.events))
        except grpc.RpcError as exc:
            self.error = exc
        finally:
            self.ended.set()

    def next(self, timeout: float = 15) -> list[Any]:
        try:
            return self.responses.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no response within {timeout}s (error: {self.error})") from None

    def until(self, done: Callable[[list[list[Any]]], bool], timeout: float = 20) -> list[list[Any]]:
        seen: list[list[Any]] = []
        deadline = time.monotonic() + timeout
        while not done(seen):
            seen.append(self.next(max(0.1, deadline - time.monotonic())))
        return seen

    def close(self) -> None:
        self.call.cancel()
        self.channel.close()


def kinds(events: list[Any]) -> list[str]:
    return [T.Name(e.type) for e in events]


def values(row: Any) -> list[bytes | None]:
    out, at = [], 0
    for length in row.lengths:
        out.append(None if length < 0 else row.values[at : at + length])
        at += max(length, 0)
    return out


def vgtid_of(keyspace: str, gtid: str = "current", shard: str = "") -> Any:
    return bd.VGtid(shard_gtids=[bd.ShardGtid(keyspace=keyspace, shard=shard, gtid=gtid)])


def ids_on(cluster: VitessCluster, keyspace: str, shard: str, count: int, start: int = 1) -> list[int]:
    found, i = [], start
    while len(found) < count:
        if cluster.shard_of(keyspace, i) == shard:
            found.append(i)
        i += 1
    return found


def data_responses(responses: list[list[Any]]) -> list[list[Any]]:
    """Responses other than empty transactions and `[VGTID, OTHER]`."""
    return [r for r in responses if kinds(r) not in (["BEGIN", "VGTID", "COMMIT"], ["VGTID", "OTHER"])]


def rows_in(responses: list[list[Any]], table: str = "") -> list[tuple[str, Any]]:
    """(shard, row change) of every ROW (of `table`, when given)."""
    return [
        (e.shard, c)
        for r in responses
        for e in r
        if e.type == T.ROW and (not table or e.row_event.table_name.endswith(f".{table}"))
        for c in e.row_event.row_changes
    ]


@pytest.fixture(autouse=True)
def _the_double(vitess: VitessCluster) -> None:
    if vitess.real:
        pytest.skip("checks the VTGate double itself (TIDEMARK_VITESS_VTGATE names a real VTGate)")


@pytest.fixture
def keyspace(vitess: VitessCluster) -> Iterator[str]:
    name = f"vt_{uuid.uuid4().hex[:10]}"
    vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(32), qty INT)")
    vitess.execute(name, "CREATE TABLE other (id INT PRIMARY KEY)")
    yield name
    vitess.drop_keyspace(name)


def started(cluster: VitessCluster, keyspace: str, **kwargs: Any) -> Stream:
    """A stream from `current`, once both shards have answered `[VGTID, OTHER]`."""
    stream = Stream(cluster, vgtid_of(keyspace), **kwargs)
    first = stream.until(
        lambda seen: {e.shard for r in seen for e in r if e.type == T.OTHER} == {"-80", "80-"}
    )
    assert all(kinds(r) == ["VGTID", "OTHER"] for r in first)
    return stream


# ---------------------------------------------------------------------- binlog phase


def test_a_transaction_is_one_response_framed_as_vtgate_frames_it(vitess, keyspace):
    stream = started(vitess, keyspace, rules=[bd.Rule(match="t")])
    try:
        a, b = ids_on(vitess, keyspace, "80-", 2)
        vitess.write(
            keyspace,
            "t",
            [Insert({"id": a, "name": "a", "qty": 1}), Insert({"id": b, "name": None, "qty": 2})],
        )
        insert = data_responses(stream.until(lambda s: bool(data_responses(s))))[0]
        assert kinds(insert) == ["BEGIN", "FIELD", "ROW", "ROW", "VGTID", "COMMIT"]
        assert {(e.keyspace, e.shard) for e in insert} == {(keyspace, "80-")}
        begin, field, row, _, vgtid, commit = insert
        assert begin.timestamp > 0 and commit.timestamp > 0 and row.current_time > 0
        assert (
            field.field_event.table_name == f"{keyspace}.t" and not field.field_event.enum_set_string_values
        )
        id_field = field.field_event.fields[0]
        assert (id_field.name, id_field.table, id_field.database, id_field.type) == (
            "id",
            "t",
            keyspace,
            q.INT32,
        )
        assert (id_field.flags, id_field.charset, id_field.column_length, id_field.column_type) == (
            53251,
            63,
            11,
            "int(11)",
        )
        assert row.row_event.table_name == f"{keyspace}.t" and row.row_event.flags == 1
        assert values(row.row_event.row_changes[0].after) == [str(a).encode(), b"a", b"1"]
        assert not row.row_event.row_changes[0].HasField("before")
        assert values(insert[3].row_event.row_changes[0].after) == [str(b).encode(), None, b"2"]
        assert (vgtid.timestamp, vgtid.current_time, vgtid.shard) == (0, 0, "80-")
        assert [(s.shard, s.gtid) for s in vgtid.vgtid.shard_gtids] == [
            ("-80", vitess.position(keyspace, "-80")), ("80-", vitess.position(keyspace, "80-"))
        ]  # fmt: skip

        # one statement, two rows: one ROW with two row changes; no FIELD this time
        with vitess.on_shard(keyspace, "80-") as conn, conn.cursor() as cur:
            cur.execute("UPDATE t SET qty = qty + 10 WHERE id IN (%s, %s)", (a, b))
        update = data_responses(stream.until(lambda s: bool(data_responses(s))))[0]
        assert kinds(update) == ["BEGIN", "ROW", "VGTID", "COMMIT"]
        changes = update[1].row_event.row_changes
        assert [values(c.before)[2] for c in changes] == [b"1", b"2"] and [
            values(c.after)[2] for c in changes
        ] == [b"11", b"12"]

        # a write the filter does not match is an empty transaction at its own position
        vitess.write(keyspace, "other", [Insert({"id": a})])
        position = vitess.position(keyspace, "80-")
        empty = stream.until(
            lambda s: any(e.type == T.VGTID and e.vgtid.shard_gtids[1].gtid == position for r in s for e in r)
        )
        assert kinds(empty[-1]) == ["BEGIN", "VGTID", "COMMIT"]
        vitess.write(keyspace, "t", [Delete({"id": a})])
        delete = data_responses(stream.until(lambda s: bool(data_responses(s))))[0]
        assert kinds(delete) == ["BEGIN", "ROW", "VGTID", "COMMIT"] and not delete[1].row_event.row_changes[
            0
        ].HasField("after")
    finally:
        stream.close()


def test_shards_interleave_only_between_transactions_and_big_ones_come_in_parts(vitess, keyspace):
    stream = started(vitess, keyspace)
    try:
        low, high = ids_on(vitess, keyspace, "-80", 300), ids_on(vitess, keyspace, "80-", 300)
        big = "x" * 900  # 300 rows of ~1 KB: more than one 250,000-byte packet

        def write(shard_ids: list[int]) -> None:
            for part in range(2):
                vitess.write(
                    keyspace,
                    "t",
                    [Insert({"id": i, "name": big[:30], "qty": part}) for i in shard_ids[part::2]],
                )

        vitess.execute(keyspace, "ALTER TABLE t MODIFY name VARCHAR(1000)")
        writers = [threading.Thread(target=write, args=(ids,)) for ids in (low, high)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        vitess.write(keyspace, "t", [Update({"id": i}, {"name": big}) for i in high])  # one big transaction
        responses = stream.until(lambda s: len(rows_in(s)) >= 900, timeout=40)
    finally:
        stream.close()
    open_shard = None
    parts: list[list[Any]] = []
    split = 0
    for response in responses:
        shards = {e.shard for e in response}
        assert len(shards) == 1, "a response holds one shard's events"
        if response[0].type == T.BEGIN:
            assert open_shard is None, "a transaction began inside another"
            open_shard, parts = response[0].shard, []
        if open_shard is not None:
            assert shards == {open_shard}, "another shard's events inside a transaction"
            parts.append(response)
        if response[-1].type == T.COMMIT:
            assert [e.type for e in response[-2:]] == [T.VGTID, T.COMMIT]
            assert sum(e.type == T.VGTID for p in parts for e in p) == 1, "one VGTID, just before COMMIT"
            if (
                sum(
                    len(c.after.values)
                    for p in parts
                    for e in p
                    if e.type == T.ROW
                    for c in e.row_event.row_changes
                )
                > 250_000
            ):
                assert len(parts) > 1, "a transaction over 250,000 row bytes comes in several responses"
                split += 1
                assert all(
                    sum(len(c.after.values) for e in p if e.type == T.ROW for c in e.row_event.row_changes)
                    <= 250_000
                    for p in parts
                )
            open_shard = None
    assert open_shard is None and split == 1
    assert {s for s, _ in rows_in(responses)} == {"-80", "80-"}


def test_current_then_resume_from_a_vgtid(vitess, keyspace):
    stream = started(vitess, keyspace)
    a, b, c = ids_on(vitess, keyspace, "-80", 3)
    try:
        vitess.write(keyspace, "t", [Insert({"id": a, "name": "a", "qty": 1})])
        first = data_responses(stream.until(lambda s: bool(rows_in(s))))[0]
    finally:
        stream.close()
    resume_at = next(e.vgtid for e in first if e.type == T.VGTID)
    vitess.write(keyspace, "t", [Insert({"id": b, "name": "b", "qty": 2})])
    vitess.write(keyspace, "t", [Insert({"id": c, "name": "c", "qty": 3})])
    resumed = Stream(vitess, resume_at)
    try:
        later = data_responses(resumed.until(lambda s: len(rows_in(s)) >= 2))
    finally:
        resumed.close()
    assert kinds(later[0]) == ["BEGIN", "FIELD", "ROW", "VGTID", "COMMIT"]  # a fresh stream sends FIELD again
    assert [values(ch.after)[0] for _, ch in rows_in(later)] == [str(b).encode(), str(c).encode()]


def test_request_errors_carry_vitess_codes_and_messages(vitess, keyspace):
    def error(vgtid: Any, **kwargs: Any) -> grpc.RpcError:
        stream = Stream(vitess, vgtid, **kwargs)
        assert stream.ended.wait(15), "the call did not end"
        stream.close()
        assert stream.error is not None
        return stream.error

    e = error(bd.VGtid())
    assert (e.code(), e.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT, "vgtid must have at least one value with a starting position"
    )  # fmt: skip
    e = error(vgtid_of(keyspace, gtid="MariaDB/0-11-1"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details().startswith(
        "if shards are unspecified, the Gtid value must be 'current' or empty; got: "
    )
    e = error(vgtid_of("", gtid=""))
    assert (
        e.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "for an empty keyspace, the Gtid value must be 'current'" in e.details()
    )
    e = error(vgtid_of(keyspace, gtid="current", shard="40-"))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"shard provided in VGTID, 40-, not found in the {keyspace} keyspace" in e.details()
    ahead = vitess.position(keyspace, "-80").rsplit("-", 1)[0] + "-999999999"
    e = error(vgtid_of(keyspace, gtid=ahead, shard="-80"))
    assert (
        e.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "GTIDSet Mismatch: requested source position:" in e.details()
    )
    e = error(vgtid_of(keyspace, gtid="MariaDB/0-4242-1", shard="-80"))  # a GTID no binlog holds
    assert e.code() == grpc.StatusCode.UNKNOWN and "(errno 1236)" in e.details()
    e = error(vgtid_of(keyspace, gtid="Foo/1", shard="-80"))
    assert e.code() == grpc.StatusCode.INTERNAL and 'unknown GTIDSet flavor "Foo"' in e.details()
    e = error(vgtid_of(keyspace), rules=[bd.Rule(match="t", filter="select id from t where id > 3")])
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "supports only" in e.details()
    with grpc.insecure_channel(vitess.grpc_address) as channel, pytest.raises(grpc.RpcError) as raised:
        vtgateservice_pb2_grpc.VitessStub(channel).Execute(vtgate_pb2.ExecuteRequest())
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_ddl_is_vgtid_ddl_and_the_next_row_brings_a_new_field(vitess, keyspace):
    stream = started(vitess, keyspace, rules=[bd.Rule(match="/^t$")])
    try:
        vitess.execute(keyspace, "ALTER TABLE t ADD COLUMN note VARCHAR(8)")
        ddl = stream.until(lambda s: sum(e.type == T.DDL for r in s for e in r) == 2)
        assert [kinds(r) for r in data_responses(ddl)] == [["VGTID", "DDL"], ["VGTID", "DDL"]]
        assert {r[1].statement for r in data_responses(ddl)} == {"ALTER TABLE t ADD COLUMN note VARCHAR(8)"}
        vitess.execute(keyspace, "ALTER TABLE other ADD COLUMN x INT")  # not in the filter: OTHER
        other = stream.until(lambda s: sum(e.type == T.OTHER for r in s for e in r) == 2)
        assert all(kinds(r) == ["VGTID", "OTHER"] for r in other)
        (a,) = ids_on(vitess, keyspace, "-80", 1)
        vitess.write(keyspace, "t", [Insert({"id": a, "name": "n", "qty": 1, "note": "new"})])
        row = data_responses(stream.until(lambda s: bool(rows_in(s))))[0]
        assert kinds(row) == ["BEGIN", "FIELD", "ROW", "VGTID", "COMMIT"]
        assert [f.name for f in row[1].field_event.fields] == ["id", "name", "qty", "note"]
    finally:
        stream.close()


# ---------------------------------------------------------------------- copy phase


def _by_shard(responses: list[list[Any]], shard: str) -> list[list[str]]:
    return [kinds(r) for r in responses if r[0].shard == shard]


def _expected_copy(batches: list[int], first_table: bool) -> list[list[str]]:
    """One table's responses on one shard: `batches` are the row counts of its batches."""
    out = [["BEGIN", "FIELD"]] + ([["VGTID"]] if first_table else [])
    for i, count in enumerate(batches):
        out += ([["BEGIN"]] if i else []) + [["ROW"] * count + ["VGTID", "COMMIT"]]
    return out + [["BEGIN", "VGTID", "COMMIT"]]


def test_copy_phase_framing_progress_and_resume(vitess, keyspace):
    vitess.execute(keyspace, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(8))")
    vitess.execute(keyspace, "CREATE TABLE b (id INT PRIMARY KEY)")
    vitess.write(keyspace, "a", [Insert({"id": i, "v": f"v{i}"}) for i in range(1, 501)])
    vitess.write(keyspace, "t", [Insert({"id": i, "name": "t", "qty": i}) for i in range(1, 11)])
    rules = [bd.Rule(match="a"), bd.Rule(match="b"), bd.Rule(match="/^t$")]
    on = {s: sorted(i for i in range(1, 501) if vitess.shard_of(keyspace, i) == s) for s in ("-80", "80-")}
    t_on = {s: sum(vitess.shard_of(keyspace, i) == s for i in range(1, 11)) for s in ("-80", "80-")}
    stream = Stream(vitess, vgtid_of(keyspace, gtid=""), rules=rules)
    try:
        copied = stream.until(
            lambda s: any(e.type == T.COPY_COMPLETED and not e.keyspace for r in s for e in r)
        )
        (late,) = ids_on(vitess, keyspace, "80-", 1, start=1000)
        vitess.write(keyspace, "t", [Insert({"id": late, "name": "late", "qty": 0})])
        live = data_responses(stream.until(lambda s: bool(rows_in(s))))
    finally:
        stream.close()
    for shard in ("-80", "80-"):
        n = len(on[shard])
        expected = _expected_copy([200, 200, n - 400] if n > 400 else [200, n - 200], True)
        expected += _expected_copy([], False) + _expected_copy([t_on[shard]], False)
        got = _by_shard(copied, shard)
        assert got[: len(expected)] == expected, shard
        assert got[len(expected)][0] == "COPY_COMPLETED"
    assert kinds(copied[-1])[-2:] == ["COPY_COMPLETED", "COPY_COMPLETED"] and copied[-1][-1].keyspace == ""
    assert sum(kinds(r).count("COPY_COMPLETED") for r in copied) == 3
    fields = [e.field_event for r in copied for e in r if e.type == T.FIELD]
    assert all(f.enum_set_string_values for f in fields) and {f.table_name for f in fields} == {
        f"{keyspace}.{n}" for n in "abt"
    }
    copy_rows = [e for r in copied for e in r if e.type == T.ROW]
    assert all(
        e.timestamp == 0 and e.row_event.flags == 0 and len(e.row_event.row_changes) == 1 for e in copy_rows
    )
    assert sorted(
        int(values(e.row_event.row_changes[0].after)[0])
        for e in copy_rows
        if e.row_event.table_name.endswith(".a")
    ) == list(range(1, 501))
    # progress: the VGTID after a batch carries the table's last primary key, bare-named
    progress = next(
        e.vgtid
        for r in copied
        for e in r
        if e.type == T.VGTID and any(s.table_p_ks for s in e.vgtid.shard_gtids)
    )
    tpk = next(t for s in progress.shard_gtids for t in s.table_p_ks)
    assert tpk.table_name == "a"
    assert [(f.name, f.type, f.charset, f.flags) for f in tpk.lastpk.fields] == [("id", q.INT32, 63, 53251)]
    assert not tpk.lastpk.fields[0].table and len(tpk.lastpk.rows) == 1
    final = [e.vgtid for r in copied for e in r if e.type == T.VGTID][-1]
    assert all(not s.table_p_ks and s.gtid.startswith("MariaDB/") for s in final.shard_gtids)
    # streaming goes on from the copy: a fresh FIELD, then the row
    assert kinds(live[0]) == ["BEGIN", "FIELD", "ROW", "VGTID", "COMMIT"]

    # resume mid-copy from a VGTID with copy progress (one shard)
    one = Stream(
        vitess, bd.VGtid(shard_gtids=[bd.ShardGtid(keyspace=keyspace, shard="-80", gtid="")]), rules=rules
    )
    try:
        first = one.until(lambda s: any(e.type == T.COMMIT for r in s for e in r))
    finally:
        one.close()
    at = next(e.vgtid for e in first[-1] if e.type == T.VGTID)
    last = int(values(at.shard_gtids[0].table_p_ks[0].lastpk.rows[0])[0])
    assert last == on["-80"][199]
    resumed = Stream(vitess, at, rules=rules)
    try:
        rest = resumed.until(
            lambda s: any(e.type == T.COPY_COMPLETED and not e.keyspace for r in s for e in r)
        )
    finally:
        resumed.close()
    a_rows = [int(values(c.after)[0]) for _, c in rows_in(rest, "a")]
    assert a_rows == [i for i in on["-80"] if i > last]
    assert kinds(rest[0]) == ["BEGIN", "FIELD"] and sum(kinds(r).count("FIELD") for r in rest) == 3


# ---------------------------------------------------------------------- text forms

TYPES = """CREATE TABLE types (id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT, bu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, d52 DECIMAL(5,2), dn DECIMAL(5,2), d200 DECIMAL(20,0), d50 DECIMAL(5,0), d199 DECIMAL(19,9),
  dt DATE, dt0 DATE, tm TIME(2), dtm DATETIME(6), dz DATETIME, ts TIMESTAMP(3) NULL, tz TIMESTAMP NULL, y YEAR, y0 YEAR,
  bt BIT(10), ch CHAR(4), bn BINARY(4), vc VARCHAR(16), vb VARBINARY(8), lat VARCHAR(8) CHARACTER SET latin1,
  tx TEXT, bl BLOB, e ENUM('a','b','c'), e0 ENUM('a','b'), s SET('a','b','c'), s0 SET('a','b'), j JSON,
  g GEOMETRY, n INT)"""
ROW = """({id}, -128, 255, -32768, -8388608, -2147483648, -9223372036854775808, 18446744073709551615,
  1.5, 3.14, 0.50, -0.05, 1, 0, 1.5, '2020-01-02', '0000-00-00', '-00:00:01.25', '2020-01-02 03:04:05.123456',
  '0000-00-00 00:00:00', '2020-01-02 03:04:05.123', 0, 2020, 0, b'101', 'ab', 'ab', 'h\u00e9llo', X'FF00', '\u00e9',
  'text', X'0102', 'b', '', 'c,a', '', '{{"a": 1}}', ST_GeomFromText('POINT(1 2)'), NULL)"""
POINT = bytes.fromhex("000000000101000000000000000000f03f0000000000000040")
BOTH = {
    "ti": b"-128", "tu": b"255", "si": b"-32768", "mi": b"-8388608", "i": b"-2147483648",
    "bi": b"-9223372036854775808", "bu": b"18446744073709551615", "d50": b"0", "dt": b"2020-01-02",
    "dt0": b"0000-00-00", "tm": b"-00:00:01.25", "dtm": b"2020-01-02 03:04:05.123456", "dz": b"0000-00-00 00:00:00",
    "ts": b"2020-01-02 03:04:05.123", "tz": b"0000-00-00 00:00:00", "y": b"2020", "y0": b"0000",
    "bt": b"\x00\x05", "ch": b"ab", "bn": b"ab\x00\x00", "vc": "h\u00e9llo".encode(), "vb": b"\xff\x00",
    "lat": b"\xe9", "tx": b"text", "bl": b"\x01\x02", "e": b"b", "e0": b"", "s": b"a,c", "s0": b"",
    "j": b'{"a": 1}', "g": POINT, "n": None,
}  # fmt: skip
BINLOG = {"f": b"1.5E+00", "d": b"3.14E+00", "d52": b".50", "dn": b"-.05", "d200": b"000000000000000001", "d199": b"000000001.500000000"}  # fmt: skip
COPY = {"f": b"1.5", "d": b"3.14", "d52": b"0.50", "dn": b"-0.05", "d200": b"1", "d199": b"1.500000000"}


def test_text_forms_of_every_type_in_the_copy_phase_and_the_binlog_phase(vitess):
    keyspace = f"vt_{uuid.uuid4().hex[:10]}"
    vitess.create_keyspace(keyspace, {"0": 2})
    try:
        vitess.execute(keyspace, TYPES)
        with vitess.on_shard(keyspace, "0") as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute("INSERT INTO types VALUES " + ROW.format(id=1))
        stream = Stream(vitess, vgtid_of(keyspace, gtid=""), rules=[bd.Rule(match="types")])
        try:
            copied = stream.until(
                lambda s: any(e.type == T.COPY_COMPLETED and not e.keyspace for r in s for e in r)
            )
            with vitess.on_shard(keyspace, "0") as conn, conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = ''")
                cur.execute("INSERT INTO types VALUES " + ROW.format(id=2))
            streamed = stream.until(lambda s: bool(rows_in(s)))
        finally:
            stream.close()
    finally:
        vitess.drop_keyspace(keyspace)
    names = [f.name for e in copied[0] if e.type == T.FIELD for f in e.field_event.fields]
    ((_, copy_change),) = rows_in(copied)
    ((_, binlog_change),) = rows_in(streamed)
    copy_values = dict(zip(names, values(copy_change.after), strict=True))
    binlog_values = dict(zip(names, values(binlog_change.after), strict=True))
    assert copy_values == {"id": b"1", **BOTH, **COPY}
    assert binlog_values == {"id": b"2", **BOTH, **BINLOG}
    field = next(e.field_event for r in streamed for e in r if e.type == T.FIELD)
    by_name = {f.name: f for f in field.fields}
    assert field.enum_set_string_values  # the table has ENUM and SET columns
    assert (by_name["bu"].type, by_name["bu"].flags & 32, by_name["bu"].flags & 32768) == (
        q.UINT64,
        32,
        32768,
    )
    assert (by_name["e"].type, by_name["e"].column_type, by_name["s"].type) == (
        q.ENUM,
        "enum('a','b','c')",
        q.SET,
    )
    assert (by_name["lat"].charset, by_name["vc"].charset, by_name["bn"].type) == (8, 45, q.BINARY)
    # MariaDB's JSON is LONGTEXT with a _bin collation: BINARY_FLAG makes it BLOB, as Vitess maps it
    assert (by_name["j"].type, by_name["j"].column_type, by_name["j"].charset) == (q.BLOB, "longtext", 46)
    assert (
        by_name["d52"].decimals,
        by_name["f"].decimals,
        by_name["ts"].decimals,
        by_name["vc"].column_length,
    ) == (2, 31, 3, 64)


# ---------------------------------------------------------------------- reshard


@pytest.fixture
def split_keyspace(vitess: VitessCluster) -> Iterator[str]:
    name = f"vt_{uuid.uuid4().hex[:10]}"
    vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(32), qty INT)")
    yield name
    vitess.drop_keyspace(name)


def test_reshard_moves_the_stream_to_the_new_shards_without_losing_a_row(vitess, split_keyspace):
    keyspace = split_keyspace
    stream = started(vitess, keyspace)
    told = started(vitess, keyspace, include_reshard_journal_events=True)
    try:
        vitess.write(keyspace, "t", [Insert({"id": i, "name": "before", "qty": i}) for i in range(1, 21)])
        vitess.split_shard(keyspace, "80-", {"80-c0": 2, "c0-": 3})
        vitess.write(keyspace, "t", [Insert({"id": i, "name": "after", "qty": i}) for i in range(21, 61)])
        responses = stream.until(lambda s: len(rows_in(s)) >= 60, timeout=30)
        with_journal = told.until(lambda s: len(rows_in(s)) >= 60, timeout=30)
    finally:
        stream.close()
        told.close()
    # include_reshard_journal_events: the same switch, with the journal shown first
    journals = [r for r in with_journal if any(e.type == T.JOURNAL for e in r)]
    assert [kinds(r) for r in journals] == [["BEGIN", "JOURNAL", "VGTID", "COMMIT"]]
    assert sorted(int(values(c.after)[0]) for _, c in rows_in(with_journal)) == list(range(1, 61))
    got = {int(values(c.after)[0]): shard for shard, c in rows_in(responses)}
    assert sorted(got) == list(range(1, 61))
    assert {got[i] for i in range(21, 61)} == {"-80", "80-c0", "c0-"}
    assert all(vitess.shard_of(keyspace, i) == got[i] for i in range(21, 61))
    assert not any(e.type == T.JOURNAL for r in responses for e in r)
    last = [e.vgtid for r in responses for e in r if e.type == T.VGTID][-1]
    assert [s.shard for s in last.shard_gtids] == ["-80", "80-c0", "c0-"]  # the new shards at the end
    new_fields = {e.shard for r in responses for e in r if e.type == T.FIELD}
    assert {"80-c0", "c0-"} <= new_fields
    assert [s.name for s in vitess.shards(keyspace)] == ["-80", "80-c0", "c0-"]


def test_stop_on_reshard_sends_the_journal_and_ends_the_stream(vitess, split_keyspace):
    keyspace = split_keyspace
    start = bd.VGtid(
        shard_gtids=[bd.ShardGtid(keyspace=keyspace, shard="80-", gtid=vitess.position(keyspace, "80-"))]
    )
    stream = Stream(vitess, start, stop_on_reshard=True)
    try:
        journal = vitess.split_shard(keyspace, "80-", {"80-c0": 2, "c0-": 3})
        response = data_responses(stream.until(lambda s: any(e.type == T.JOURNAL for r in s for e in r)))[-1]
        assert stream.ended.wait(10), "the stream did not end"
    finally:
        stream.close()
    assert stream.error is None  # the call ended with status OK
    assert kinds(response) == ["BEGIN", "JOURNAL", "VGTID", "COMMIT"]
    sent = response[1].journal
    assert (response[1].keyspace, response[1].shard, sent.id, sent.migration_type) == (
        keyspace,
        "80-",
        journal.id,
        bd.SHARDS,
    )
    assert [(p.keyspace, p.shard) for p in sent.participants] == [(keyspace, "80-")]
    assert [(s.shard, s.gtid) for s in sent.shard_gtids] == [
        ("80-c0", vitess.position(keyspace, "80-c0")), ("c0-", vitess.position(keyspace, "c0-"))
    ]  # fmt: skip
    assert [s.shard for s in response[2].vgtid.shard_gtids] == ["80-"]  # the old shard list


# ---------------------------------------------------------------------- the process


def test_kill_9_and_restart_the_client_resumes_from_its_vgtid(vitess, keyspace):
    a, b, c = ids_on(vitess, keyspace, "80-", 3)
    stream = started(vitess, keyspace)
    try:
        vitess.write(keyspace, "t", [Insert({"id": a, "name": "a", "qty": 1})])
        first = data_responses(stream.until(lambda s: bool(rows_in(s))))
        resume_at = next(e.vgtid for e in first[0] if e.type == T.VGTID)
        vitess.kill()
        assert stream.ended.wait(10)
        assert stream.error is not None and stream.error.code() == grpc.StatusCode.UNAVAILABLE
        vitess.write(keyspace, "t", [Insert({"id": b, "name": "b", "qty": 2})])  # while VTGate is down
    finally:
        stream.close()
        if vitess.process is None or vitess.process.poll() is not None:
            vitess.start()
    resumed = Stream(vitess, resume_at)
    try:
        vitess.write(keyspace, "t", [Insert({"id": c, "name": "c", "qty": 3})])
        later = data_responses(resumed.until(lambda s: len(rows_in(s)) >= 2))
    finally:
        resumed.close()
    assert kinds(later[0]) == ["BEGIN", "FIELD", "ROW", "VGTID", "COMMIT"]
    assert [values(ch.after)[0] for _, ch in rows_in(later)] == [str(b).encode(), str(c).encode()]


# ---------------------------------------------------------------------- MySQL protocol


def router(vitess: VitessCluster, **kwargs: Any) -> pymysql.Connection:
    return pymysql.connect(
        host=vitess.mysql_host, port=vitess.mysql_port, user=os.environ["TIDEMARK_DB_USER"],
        password=os.environ["TIDEMARK_DB_PASSWORD"], autocommit=True, **kwargs,
    )  # fmt: skip


def test_the_mysql_protocol_targets_shards(vitess, keyspace):
    low, high = ids_on(vitess, keyspace, "-80", 2), ids_on(vitess, keyspace, "80-", 2)
    vitess.write(keyspace, "t", [Insert({"id": i, "name": "r", "qty": i}) for i in low + high])
    with router(vitess) as conn, conn.cursor() as cur:
        cur.execute("SHOW VITESS_SHARDS LIKE %s", (f"{keyspace}/%",))
        assert cur.fetchall() == ((f"{keyspace}/-80",), (f"{keyspace}/80-",))
        assert [d[0] for d in cur.description] == ["Shards"]
        cur.execute(f"USE `{keyspace}:-80`")
        cur.execute("SELECT id, name FROM t ORDER BY id")
        assert cur.fetchall() == tuple((i, "r") for i in low)
        cur.execute("SET @marker = 42")
        cur.execute(f"USE `{keyspace}/80-@primary`")
        cur.execute("SELECT id FROM t ORDER BY id")
        assert [r[0] for r in cur.fetchall()] == high
        cur.execute("SELECT @marker")  # session settings follow the session to the next shard
        assert cur.fetchone() == (42,)
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t (id, name, qty) VALUES (%s, 'router', 0)", (high[-1] + 1000,))
        cur.execute("COMMIT")
        cur.execute(f"USE `{keyspace}`")
        with pytest.raises(pymysql.err.OperationalError) as refused:
            cur.execute("SELECT id FROM t")
        assert "needs a shard target" in refused.value.args[1]
        with pytest.raises(pymysql.err.OperationalError) as unknown:
            cur.execute("USE `no_such_keyspace:-80`")
        assert unknown.value.args[0] == 1049
    assert any(r["id"] == high[-1] + 1000 for r in vitess.rows(keyspace, "t"))
    with router(vitess, database=f"{keyspace}:80-") as conn, conn.cursor() as cur:  # target in the handshake
        cur.execute("SELECT COUNT(*) FROM t")
        assert cur.fetchone()[0] == vitess.rows(keyspace, "t").__len__() - len(low)
        conn.select_db(f"{keyspace}:-80")  # COM_INIT_DB
        cur.execute("SELECT COUNT(*) FROM t")
        assert cur.fetchone() == (len(low),)
        conn.ping()
    with pytest.raises(pymysql.err.OperationalError) as denied:
        pymysql.connect(
            host=vitess.mysql_host,
            port=vitess.mysql_port,
            user=os.environ["TIDEMARK_DB_USER"],
            password="wrong",
        )
    assert denied.value.args[0] == 1045 and "Access denied" in denied.value.args[1]


# ---------------------------------------------------------------------- heartbeats


def test_keyspace_and_vtgate_heartbeats(vitess, keyspace, tmp_path):
    cluster = VitessCluster(tmp_path, shard_server_ports(), shard_admin(), tablet_heartbeats=0.3)
    beating = f"vt_{uuid.uuid4().hex[:10]}"
    cluster.create_keyspace(beating, {"0": 3})
    cluster.start()
    try:
        streamed = Stream(cluster, vgtid_of(beating), stream_keyspace_heartbeats=True)
        plain = Stream(cluster, vgtid_of(beating), heartbeat_interval=1)
        try:
            beats = streamed.until(lambda s: len(rows_in(s, "heartbeat")) >= 2)
            empty = plain.until(lambda s: sum(kinds(r) == ["BEGIN", "VGTID", "COMMIT"] for r in s) >= 2)
        finally:
            streamed.close()
            plain.close()
    finally:
        cluster.stop()
        cluster.drop_keyspace(beating)
    field = next(e.field_event for r in beats for e in r if e.type == T.FIELD)
    assert (field.table_name, field.is_internal_table, field.enum_set_string_values) == (
        f"{beating}.heartbeat",
        True,
        False,
    )
    assert [f.name for f in field.fields] == ["keyspaceShard", "tabletUid", "ts"]
    assert all(f.database == "_vt" and not f.column_type for f in field.fields)
    rows = rows_in(beats, "heartbeat")
    assert all(values(c.after)[0] == f"{beating}:0".encode() for _, c in rows)
    assert rows[-1][1].HasField("before")  # later writes are updates
    assert all(e.row_event.is_internal_table for r in beats for e in r if e.type == T.ROW)
    assert all(kinds(r) in (["VGTID", "OTHER"], ["BEGIN", "VGTID", "COMMIT"]) for r in empty)
    # VTGate's own heartbeat: after heartbeat_interval seconds with nothing sent
    idle = Stream(vitess, vgtid_of(keyspace), heartbeat_interval=1)
    try:
        heartbeat = idle.until(lambda s: any(e.type == T.HEARTBEAT for r in s for e in r), timeout=10)[-1]
    finally:
        idle.close()
    assert kinds(heartbeat) == ["HEARTBEAT"] and (heartbeat[0].keyspace, heartbeat[0].shard) == ("", "")
    assert heartbeat[0].timestamp > 0 and heartbeat[0].current_time > 0
