"""A shard split as Vitess's Reshard workflow does it, against the double's servers.

1. Writes to the source stop (the cluster's write lock: the test helpers wait); the
   target shards join the topology, not serving yet.
2. Every table of the keyspace is created on the target servers and the source's rows
   of each target's key range copied there (what VReplication's copy and catch-up do).
3. The targets' positions are recorded; a VStream follows the targets from them.
4. The journal goes into the source shard's `_vt.resharding_journal`, as a prototext
   `binlogdata.Journal` (migration SHARDS, participants: the source shards, shard_gtids:
   the targets and their positions), which is what turns into a JOURNAL event in the
   source's binlog stream (`vstreamer.processJournalEvent`).
5. The topology is switched: targets serving, the source not (SwitchTraffic). A VGTID
   may still name the old shard; it stays in the topology, not serving, so streams can
   resume from it up to the journal."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate.fields import quote
from tests.support.vtgate.topology import Shard
from tests.support.vtgate.vindex import contains, key_range, keyspace_id
from tests.support.vtgate.writes import primary_key

if TYPE_CHECKING:
    from tests.support.vtgate.cluster import VitessCluster


def split_shard(cluster: VitessCluster, keyspace: str, source: str, targets: dict[str, int]) -> bd.Journal:
    """Split `source` into `targets` (shard name -> index of its server); the journal."""
    with cluster.writes:
        shards = cluster.topology.load().get(keyspace, [])
        old = next((s for s in shards if s.name == source and s.serving), None)
        if old is None:
            raise ValueError(f"{keyspace} has no serving shard {source}")
        for name in targets:
            if not _within(name, source):
                raise ValueError(f"target shard {name} is not inside {source}")
        used = {s.port for s in shards if s.name != source}
        for name, index in targets.items():
            if cluster.shard_servers[index] in used | {old.port}:
                raise ValueError(
                    f"server {index} already holds a shard of {keyspace}; choose another for {name}"
                )
        new = [Shard(n, "127.0.0.1", cluster.shard_servers[i], serving=False) for n, i in targets.items()]
        _save(cluster, keyspace, [*shards, *new])  # the targets exist (not serving) before the switch
        tables = _read_source(cluster, old, keyspace)
        positions = {
            name: _fill_target(cluster, keyspace, index, name, tables) for name, index in targets.items()
        }
        with cluster.connect(old) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            local = "MariaDB/" + cur.fetchone()[0]
            journal = bd.Journal(
                id=random.randrange(1, 2**62),
                migration_type=bd.SHARDS,
                local_position=local,
                shard_gtids=[bd.ShardGtid(keyspace=keyspace, shard=n, gtid=p) for n, p in positions.items()],
                participants=[bd.KeyspaceShard(keyspace=keyspace, shard=source)],
                source_workflows=[f"reshard_{keyspace}"],
            )
            cur.execute(
                "INSERT INTO _vt.resharding_journal (id, db_name, val) VALUES (%s, %s, %s)",
                (journal.id, keyspace, text_format.MessageToString(journal)),
            )
        switched = [s for s in shards if s.name != source]
        switched.append(Shard(source, old.host, old.port, serving=False))
        switched += [Shard(s.name, s.host, s.port) for s in new]
        _save(cluster, keyspace, switched)
        return journal


def _save(cluster: VitessCluster, keyspace: str, shards: list[Shard]) -> None:
    keyspaces = cluster.topology.load()
    keyspaces[keyspace] = sorted(shards, key=lambda s: (key_range(s.name)[0], not s.serving))
    cluster.topology.save(keyspaces)


def _read_source(
    cluster: VitessCluster, old: Shard, keyspace: str
) -> list[tuple[str, str, str, list[str], list[Any]]]:
    """(table, CREATE TABLE, vindex column, column names, rows) of every base table."""
    found = []
    with cluster.connect(old, keyspace) as conn, conn.cursor() as cur:
        cur.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
        for table, _ in cur.fetchall():
            cur.execute(f"SHOW CREATE TABLE {quote(table)}")
            definition = cur.fetchone()[1]
            vindex = primary_key(conn, keyspace, table)[0]
            cur.execute(f"SELECT * FROM {quote(table)}")
            names = [d[0] for d in cur.description]
            found.append((table, definition, vindex, names, list(cur.fetchall())))
    return found


def _fill_target(cluster: VitessCluster, keyspace: str, index: int, shard: str, tables: list[Any]) -> str:
    with cluster.server(index) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute(f"DROP DATABASE IF EXISTS {quote(keyspace)}")
        cur.execute(f"CREATE DATABASE {quote(keyspace)} CHARACTER SET utf8mb4")
        cur.execute(f"USE {quote(keyspace)}")
        for table, definition, vindex, names, rows in tables:
            cur.execute(definition)
            at = names.index(vindex)
            mine = [r for r in rows if contains(shard, keyspace_id(r[at]))]
            if mine:
                columns = ", ".join(quote(n) for n in names)
                cur.executemany(
                    f"INSERT INTO {quote(table)} ({columns}) VALUES ({', '.join(['%s'] * len(names))})", mine
                )
        cur.execute("SELECT @@global.gtid_binlog_pos")
        return "MariaDB/" + cur.fetchone()[0]


def _within(inner: str, outer: str) -> bool:
    (inner_start, inner_end), (outer_start, outer_end) = key_range(inner), key_range(outer)
    if inner_start < outer_start:
        return False
    return outer_end is None or (inner_end is not None and inner_end <= outer_end)
