"""Vitess positions: the rank and epoch of seed 004's ordering rule, key ranges, VGTIDs."""

from __future__ import annotations

import pytest

from cdc_core.connectors.vitess.positions import (
    KeyRange,
    inherited_epoch,
    next_epoch,
    parse_position,
)
from cdc_core.connectors.vitess.vgtid import ShardGtid, Vgtid, for_keyspace, moved
from cdc_core.errors import TidemarkError

UUID_A = "e03ece6c-4c04-11ec-8e20-0242ac110004"
UUID_B = "f1111111-4c04-11ec-8e20-0242ac110004"


def test_rank_is_the_sum_of_each_sources_highest_sequence_number():
    assert parse_position(f"MySQL56/{UUID_A}:1-68").rank == 68  # seed 004's example
    assert parse_position(f"MySQL56/{UUID_A}:1-123,{UUID_B}:1-234").rank == 357
    # a set with a gap: the highest end, so the next transaction's rank still grows
    assert parse_position(f"MySQL56/{UUID_A}:1-5:7-9").rank == 9
    assert parse_position(f"MySQL56/{UUID_A}:1-5:7-10").rank == 10
    assert parse_position("MariaDB/0-11-47").rank == 47
    assert parse_position("MariaDB/0-11-47,1-12-3").rank == 50
    assert parse_position("0-11-47").flavor == ""  # VStream accepts the flavor left out


def test_an_unreadable_position_is_refused_with_its_text():
    with pytest.raises(TidemarkError, match="not-a-gtid"):
        parse_position("MySQL56/not-a-gtid")


def test_the_epoch_stays_while_the_sources_are_kept_and_grows_when_one_is_lost():
    a = f"MySQL56/{UUID_A}:1-10"
    both = f"MySQL56/{UUID_A}:1-10,{UUID_B}:1-2"  # a new primary that kept the old history
    only_b = f"MySQL56/{UUID_B}:1-3"  # a primary whose history lacks the old one: ranks start over
    assert next_epoch(4, a, f"MySQL56/{UUID_A}:1-11") == 4
    assert next_epoch(4, a, both) == 4
    assert next_epoch(4, both, only_b) == 5
    assert next_epoch(0, "current", a) == 1  # a new sequence of ranks begins (as Debezium)
    assert next_epoch(0, "", a) == 1


def test_a_shard_born_in_a_reshard_orders_after_every_shard_it_came_from():
    epochs = {"-80": 2, "80-": 5}
    assert inherited_epoch("80-c0", epochs) == 6
    assert inherited_epoch("c0-", epochs) == 6
    assert inherited_epoch("-40", epochs) == 3
    assert inherited_epoch("0", epochs) == 6  # a merge into one shard
    assert inherited_epoch("-80", {}) == 0


def test_key_ranges_overlap_as_vitess_names_them():
    assert KeyRange.of("-80").overlaps(KeyRange.of("40-c0"))
    assert not KeyRange.of("-80").overlaps(KeyRange.of("80-"))
    assert KeyRange.of("80-").overlaps(KeyRange.of("c0-"))
    assert KeyRange.of("0").overlaps(KeyRange.of("ff-"))
    with pytest.raises(TidemarkError, match="not a key range"):
        KeyRange.of("zz")


def test_a_vgtid_is_written_in_debeziums_form_and_read_back():
    vgtid = Vgtid((ShardGtid("ks", "-80", "MariaDB/0-11-5"), ShardGtid("ks", "80-", "MariaDB/0-12-7")))
    text = vgtid.to_json()
    assert text == (
        '[{"keyspace":"ks","shard":"-80","gtid":"MariaDB/0-11-5","table_p_ks":[]},'
        '{"keyspace":"ks","shard":"80-","gtid":"MariaDB/0-12-7","table_p_ks":[]}]'
    )
    assert Vgtid.from_json(text) == vgtid
    assert moved(vgtid, "80-", "MariaDB/0-12-8").shard("80-").gtid == "MariaDB/0-12-8"
    assert vgtid.only("-80").shard_names == ("-80",)
    assert for_keyspace("ks", (), "current").shards == (ShardGtid("ks", "", "current"),)
    with pytest.raises(TidemarkError, match="not a VGTID"):
        Vgtid.from_json("{broken")


def test_a_vgtid_with_copy_progress_round_trips_through_the_protos():
    from cdc_core.connectors.vitess.generated import binlogdata_pb2, query_pb2

    lastpk = query_pb2.QueryResult(
        fields=[query_pb2.Field(name="id", type=query_pb2.INT64, charset=63, flags=53251)],
        rows=[query_pb2.Row(lengths=[2], values=b"10")],
    )
    message = binlogdata_pb2.VGtid(
        shard_gtids=[
            binlogdata_pb2.ShardGtid(
                keyspace="ks",
                shard="-80",
                gtid="MariaDB/0-11-5",
                table_p_ks=[binlogdata_pb2.TableLastPK(table_name="t", lastpk=lastpk)],
            )
        ]
    )
    vgtid = Vgtid.from_proto(message)
    assert vgtid.copying()
    assert vgtid.shards[0].table_p_ks[0]["table_name"] == "t"
    assert Vgtid.from_json(vgtid.to_json()).to_proto(binlogdata_pb2) == message


def test_a_position_is_described_shard_by_shard():
    from cdc_core.connectors.vitess.connector import CONNECTOR

    vgtid = Vgtid(
        (ShardGtid("ks", "-80", "MariaDB/0-11-5"), ShardGtid("ks", "80-", "", ({"table_name": "t"},)))
    )
    text = CONNECTOR.describe_position({"vgtid": vgtid.to_json(), "epochs": {}})
    assert text == "ks/-80@MariaDB/0-11-5 ks/80-@copy (copying 1 table(s))"
