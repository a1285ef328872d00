"""The VTGate double speaks VStream and VTGate's MySQL protocol as Vitess 21 does (the
research notes behind it: README "Vitess"), checked through grpcio and pymysql only, as a
client sees it: a transaction in one response with its VGTID before its COMMIT, `current`
resolved per shard at once, the copy phase's framing, Vitess's errors, shard targeting."""

from __future__ import annotations

import uuid

import grpc
import pymysql
import pytest

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import topodata_pb2, vtgate_pb2, vtgateservice_pb2_grpc

pytestmark = pytest.mark.integration
T = bd.VEventType


@pytest.fixture
def keyspace(vitess):
    if vitess.real:
        pytest.skip("checks the double itself")
    name = vitess.create_keyspace(f"dbl_{uuid.uuid4().hex[:8]}", {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(16))")
    yield name
    vitess.drop_keyspace(name)


def stream(vitess, shard_gtids: list, **flags):
    channel = grpc.insecure_channel(vitess.grpc_address)
    request = vtgate_pb2.VStreamRequest(
        tablet_type=topodata_pb2.PRIMARY,
        vgtid=bd.VGtid(shard_gtids=shard_gtids),
        filter=bd.Filter(rules=[bd.Rule(match="/.*")]),
        flags=vtgate_pb2.VStreamFlags(**flags),
    )
    return vtgateservice_pb2_grpc.VitessStub(channel).VStream(request, timeout=20)


def kinds(response) -> list[str]:
    return [T.Name(e.type) for e in response.events]


def test_current_then_a_transaction_per_response_with_its_vgtid_before_its_commit(vitess, keyspace):
    call = stream(vitess, [bd.ShardGtid(keyspace=keyspace, gtid="current")])
    first = [next(call), next(call)]
    assert [kinds(r) for r in first] == [["VGTID", "OTHER"], ["VGTID", "OTHER"]]
    assert {r.events[0].shard for r in first} == {"-80", "80-"}
    key = next(i for i in range(100) if vitess.shard_of(keyspace, i) == "80-")
    vitess.write(keyspace, {"80-": [("INSERT INTO t VALUES (%s, 'x')", (key,))]})
    response = next(call)
    assert kinds(response) == ["BEGIN", "FIELD", "ROW", "VGTID", "COMMIT"]
    field, row, vgtid = response.events[1], response.events[2], response.events[3]
    assert field.field_event.table_name == f"{keyspace}.t" and field.field_event.fields[0].flags & 2
    assert row.row_event.table_name == f"{keyspace}.t" and row.row_event.shard == "80-"
    assert {s.shard: s.gtid.startswith("MariaDB/0-") for s in vgtid.vgtid.shard_gtids} == {
        "-80": True,
        "80-": True,
    }
    assert vgtid.timestamp == 0 and response.events[4].timestamp > 0
    call.cancel()


def test_the_copy_phase_is_framed_as_vitess_frames_it(vitess, keyspace):
    rows = {"-80": [], "80-": []}
    for i in range(30):
        rows[vitess.shard_of(keyspace, i)].append(("INSERT INTO t VALUES (%s, 'c')", (i,)))
    vitess.write(keyspace, rows)
    call = stream(vitess, [bd.ShardGtid(keyspace=keyspace, gtid="")])
    seen, done = [], 0
    for response in call:
        seen.append(kinds(response))
        done += sum(e.type == T.COPY_COMPLETED for e in response.events)
        if done == 3:  # one per shard and the final one
            break
    call.cancel()
    assert seen[-1][-1] == "COPY_COMPLETED"
    copied = [r for r in seen if "ROW" in r]
    assert all(r[0] == "BEGIN" and r[-2:] == ["VGTID", "COMMIT"] for r in copied)
    assert sum(r.count("ROW") for r in copied) >= 30


def test_vitess_errors_for_a_wrong_shard_a_wrong_filter_and_a_position_ahead(vitess, keyspace):
    with pytest.raises(grpc.RpcError) as caught:
        next(stream(vitess, [bd.ShardGtid(keyspace=keyspace, shard="-40", gtid="current")]))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "shard provided in VGTID, -40, not found" in caught.value.details()
    with pytest.raises(grpc.RpcError) as caught:
        next(stream(vitess, [bd.ShardGtid(keyspace=keyspace, gtid="MariaDB/0-11-5")]))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    ahead = vitess.position(keyspace, "-80").rsplit("-", 1)[0] + "-999999999"
    with pytest.raises(grpc.RpcError) as caught:
        next(stream(vitess, [bd.ShardGtid(keyspace=keyspace, shard="-80", gtid=ahead)]))
    assert "GTIDSet Mismatch" in caught.value.details()


def test_the_mysql_protocol_targets_shards_and_checks_the_password(vitess, keyspace):
    import os

    login = {"host": "127.0.0.1", "port": vitess.mysql_port, "user": os.environ["TIDEMARK_DB_USER"]}
    with pymysql.connect(**login, password=os.environ["TIDEMARK_DB_PASSWORD"]) as conn, conn.cursor() as cur:
        cur.execute("SHOW VITESS_SHARDS LIKE %s", (f"{keyspace}/%",))
        assert [r[0] for r in cur.fetchall()] == [f"{keyspace}/-80", f"{keyspace}/80-"]
        with pytest.raises(pymysql.err.OperationalError, match="shard target"):
            cur.execute(f"USE `{keyspace}`")
            cur.execute("SELECT * FROM t")
        cur.execute(f"USE `{keyspace}:80-@primary`")
        cur.execute("INSERT INTO t VALUES (1000, 'on 80-')")
        cur.execute("SELECT name FROM t WHERE id = %s", (1000,))
        assert cur.fetchall() == (("on 80-",),)
    with vitess.on_shard(keyspace, "80-") as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t WHERE id = 1000")
        assert cur.fetchone()[0] == 1
    with pytest.raises(pymysql.err.OperationalError) as refused:
        pymysql.connect(**login, password="not the password")
    assert refused.value.args[0] == 1045
