"""What tests do with the double: run it, make keyspaces, write rows where Vitess would
put them, read them back, reshard, kill and restart it.

Writes go straight to the shard servers (as the admin user), routed by the double's
vindex (`vindex.py`), one transaction per shard touched, committed one after another:
Vitess's own behaviour for a transaction spanning shards without two-phase commit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate.fields import quote
from tests.support.vtgate.topology import Shard, Topology
from tests.support.vtgate.vindex import keyspace_id, shard_for
from tests.support.vtgate.writes import Change, Statements, primary_key, route

ROOT = Path(__file__).resolve().parents[3]
SIGNAL_TABLE = "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VitessCluster:
    """The double's process and its four shard servers (`shard_servers`: their ports).
    `real` is False: `real.py` stands in for it with a real VTGate."""

    real = False
    host = "127.0.0.1"

    def __init__(
        self,
        directory: Path,
        shard_ports: Sequence[int],
        admin: dict[str, Any],
        *,
        copy_batch_rows: int = 200,
        tablet_heartbeats: float = 0.0,
    ) -> None:
        self.directory = Path(directory)
        self.shard_servers = list(shard_ports)
        self.admin = admin  # user and password of the shard servers' admin
        self.copy_batch_rows, self.tablet_heartbeats = copy_batch_rows, tablet_heartbeats
        self.topology = Topology(self.directory / "topology.json")
        if not self.topology.path.exists():
            self.topology.save({})
        self.grpc_port, self.mysql_port = free_port(), free_port()
        self.mysql_host = "127.0.0.1"
        self.process: subprocess.Popen[bytes] | None = None
        self.writes = threading.RLock()  # held by a reshard while it stops writes to the source

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "vtgate.log"

    # ------------------------------------------------------------------ the process

    def start(self) -> None:
        command = [
            sys.executable, "-m", "tests.support.vtgate", "--topology", str(self.topology.path),
            "--grpc-port", str(self.grpc_port), "--mysql-port", str(self.mysql_port),
            "--copy-batch-rows", str(self.copy_batch_rows),
        ]  # fmt: skip
        if self.tablet_heartbeats:
            command += ["--tablet-heartbeats", str(self.tablet_heartbeats)]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the VTGate double exited with {self.process.returncode}; see {self.log_file}"
                )
            if all(_listening(p) for p in (self.grpc_port, self.mysql_port)):
                return
            time.sleep(0.05)
        raise RuntimeError(f"the VTGate double did not listen within 30 s; see {self.log_file}")

    def kill(self) -> None:
        """SIGKILL, as a crashed VTGate."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        """Kill and start again on the same ports; streams must resume from their VGTIDs."""
        self.kill()
        self.start()

    # ------------------------------------------------------------------ keyspaces

    def server(self, index: int, database: str | None = None) -> pymysql.Connection:
        """An admin connection to shard server `index` (0-3)."""
        return self._connect("127.0.0.1", self.shard_servers[index], database)

    def connect(self, shard: Shard, database: str | None = None) -> pymysql.Connection:
        return self._connect(shard.host, shard.port, database)

    def _connect(self, host: str, port: int, database: str | None) -> pymysql.Connection:
        return pymysql.connect(
            host=host, port=port, **self.admin, database=database, autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )  # fmt: skip

    def create_keyspace(self, name: str, shards: dict[str, int] | None = None) -> str:
        """A keyspace with `shards` (shard name -> index of its server; default -80 and 80-
        on the first two): its database on each, with a `debezium_signal` table. Returns
        the keyspace's name (a real VTGate's stand-in returns its fixed keyspace)."""
        shards = shards if shards is not None else {"-80": 0, "80-": 1}
        if len(set(shards.values())) != len(shards):
            raise ValueError(
                "each shard of a keyspace needs a server of its own (its database has the keyspace's name)"
            )
        keyspaces = self.topology.load()
        keyspaces[name] = [Shard(s, "127.0.0.1", self.shard_servers[i]) for s, i in shards.items()]
        self.topology.save(keyspaces)  # first, so a stream sees the new database as a keyspace's
        for index in shards.values():
            with self.server(index) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
                cur.execute(f"CREATE DATABASE {quote(name)} CHARACTER SET utf8mb4")
                cur.execute(f"USE {quote(name)}")
                cur.execute(SIGNAL_TABLE)
        return name

    def drop_keyspace(self, name: str) -> None:
        for shard in self.topology.load().get(name, []):
            with self.connect(shard) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
        keyspaces = self.topology.load()
        keyspaces.pop(name, None)
        self.topology.save(keyspaces)

    def shards(self, keyspace: str) -> list[Shard]:
        return self.topology.shards(keyspace)

    @contextmanager
    def on_shard(self, keyspace: str, shard: str) -> Iterator[pymysql.Connection]:
        """An admin connection to a shard's server, in the keyspace's database."""
        found = self.topology.shard(keyspace, shard)
        if found is None:
            raise LookupError(f"no shard {shard} in keyspace {keyspace}")
        conn = self.connect(found, keyspace)
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, keyspace: str, sql: str, params: Sequence[Any] | None = None) -> None:
        """A statement on every serving shard (DDL, as Vitess applies it to each)."""
        with self.writes:
            for shard in self.shards(keyspace):
                with self.connect(shard, keyspace) as conn, conn.cursor() as cur:
                    cur.execute(sql, params)

    def shard_of(self, keyspace: str, value: Any) -> str:
        """The serving shard that holds a row whose first primary-key column is `value`."""
        return shard_for(keyspace_id(value), [s.name for s in self.shards(keyspace)])

    def write(self, keyspace: str, table: str | Statements, changes: Sequence[Change] = ()) -> None:
        """`write(ks, "t", [Insert(...), Update(...), Delete(...)])`: the changes, routed to
        their shards; or `write(ks, {shard: [(sql, params), ...]})`: statements per shard.
        Either way one transaction per shard, committed one after another."""
        with self.writes:
            if isinstance(table, str):
                statements = self._route(keyspace, table, changes)
            else:
                statements = table
            for shard, todo in statements.items():
                with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
                    cur.execute("BEGIN")
                    for sql, params in todo:
                        cur.execute(sql, params)
                    cur.execute("COMMIT")

    def _route(self, keyspace: str, table: str, changes: Sequence[Change]) -> Statements:
        first = self.shards(keyspace)[0]
        with self.connect(first) as conn:
            key = primary_key(conn, keyspace, table)

        def read_row(shard: str, row_key: dict[str, Any]) -> dict[str, Any]:
            where = " AND ".join(f"{quote(c)} = %s" for c in row_key)
            with self.on_shard(keyspace, shard) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(f"SELECT * FROM {quote(table)} WHERE {where}", list(row_key.values()))
                found = cur.fetchone()
            if found is None:
                raise LookupError(f"no row {row_key} in {keyspace}.{table} on shard {shard}")
            return found

        return route(table, key, changes, lambda v: self.shard_of(keyspace, v), read_row)

    def rows(self, keyspace: str, table: str, columns: str = "*") -> list[dict[str, Any]]:
        """The table's rows on every serving shard."""
        found: list[dict[str, Any]] = []
        for shard in self.shards(keyspace):
            with self.connect(shard, keyspace) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(f"SELECT {columns} FROM {quote(table)}")
                found += cur.fetchall()
        return found

    def position(self, keyspace: str, shard: str) -> str:
        """A shard's position in VStream's form (`MariaDB/0-11-42`)."""
        with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            return "MariaDB/" + cur.fetchone()[0]

    def current_vgtid(self, keyspace: str) -> Any:
        """A `binlogdata.VGtid` of the keyspace's serving shards at their positions now."""
        return bd.VGtid(
            shard_gtids=[
                bd.ShardGtid(keyspace=keyspace, shard=s.name, gtid=self.position(keyspace, s.name))
                for s in self.shards(keyspace)
            ]
        )

    def split_shard(self, keyspace: str, source: str, targets: dict[str, int]) -> Any:
        """Vitess's Reshard of `source` into `targets` (shard -> server index); the journal.
        See `resharding.py`."""
        from tests.support.vtgate.resharding import split_shard

        return split_shard(self, keyspace, source, targets)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


def vitess_connector(
    cluster: VitessCluster,
    directory: Path,
    keyspace: str,
    extra: dict[str, Any] | None = None,
    prefix: str = "tm",
) -> Any:
    """A connector file for `keyspace` behind the double, state and log under `directory`
    (streaming from now, as the other sources' fixtures do, unless `extra` says otherwise)."""
    from tests.support.streamer import connector_file

    props: dict[str, Any] = {
        "connector.class": "vitess",
        "database.hostname": cluster.host,
        "database.port": cluster.grpc_port,
        "vitess.keyspace": keyspace,
        "vitess.mysql.hostname": cluster.host,
        "vitess.mysql.port": cluster.mysql_port,
        "snapshot.mode": "never",
        "signal.data.collection": f"{keyspace}.debezium_signal",
        **(extra or {}),
    }
    return connector_file(directory, keyspace, props, prefix)
