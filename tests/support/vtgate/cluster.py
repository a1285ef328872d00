"""What tests do with the double: run it, make keyspaces, write rows where Vitess would
put them, read them back, reshard, kill and restart it.

Writes go straight to the shard servers, routed by the double's vindex (`vindex.py`),
one transaction per shard touched, committed one after another: Vitess's own behaviour
for a transaction spanning shards without two-phase commit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql

from tests.support.vtgate.topology import Shard, Topology
from tests.support.vtgate.vindex import in_range, shard_for

ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class VitessCluster:
    def __init__(self, directory: Path, shard_ports: Sequence[int], admin: dict[str, Any]) -> None:
        self.directory = directory
        self.shard_ports = list(shard_ports)
        self.admin = admin  # user and password of the shard servers' admin
        self.topology = Topology(directory / "topology.json")
        self.grpc_port, self.mysql_port = free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    # ------------------------------------------------------------------ the process

    def start(self) -> None:
        log = open(self.directory / "vtgate.log", "ab")  # noqa: SIM115 (the child writes it)
        env = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "tests.support.vtgate", "--topology", str(self.topology.path),
                "--grpc-port", str(self.grpc_port), "--mysql-port", str(self.mysql_port), "--copy-batch-rows", "200",
            ],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the VTGate double exited; see {self.directory / 'vtgate.log'}")
            if all(_listening(p) for p in (self.grpc_port, self.mysql_port)):
                return
            time.sleep(0.1)
        raise RuntimeError("the VTGate double did not start listening within 30 s")

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
        self.kill()
        self.start()

    # ------------------------------------------------------------------ keyspaces

    def server(self, index: int) -> pymysql.Connection:
        return pymysql.connect(
            host="127.0.0.1",
            port=self.shard_ports[index],
            **self.admin,
            autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )

    host = "127.0.0.1"
    real = False  # the double (tests/support/vtgate/real.py is a real VTGate's stand-in for this)

    def create_keyspace(self, name: str, shards: dict[str, int] | None = None) -> str:
        """`shards`: shard name → index of its server (default: -80 and 80- on the first
        two). Returns the keyspace to use (`name`)."""
        shards = shards if shards is not None else {"-80": 0, "80-": 1}
        for index in set(shards.values()):
            with self.server(index) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {_q(name)}")
                cur.execute(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4")
                cur.execute(
                    f"CREATE TABLE {_q(name)}.debezium_signal (id VARCHAR(42) PRIMARY KEY, "
                    "type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
                )
        keyspaces = self.topology.load()
        keyspaces[name] = [Shard(s, "127.0.0.1", self.shard_ports[i]) for s, i in shards.items()]
        self.topology.save(keyspaces)
        return name

    def drop_keyspace(self, name: str) -> None:
        keyspaces = self.topology.load()
        for shard in keyspaces.pop(name, []):
            with self._connect(shard) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {_q(name)}")
        self.topology.save(keyspaces)

    def shards(self, keyspace: str) -> list[Shard]:
        return self.topology.shards(keyspace)

    def _connect(self, shard: Shard, database: str | None = None) -> pymysql.Connection:
        return pymysql.connect(
            host=shard.host, port=shard.port, **self.admin, database=database, autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )  # fmt: skip

    @contextmanager
    def on_shard(self, keyspace: str, shard: str) -> Iterator[pymysql.Connection]:
        found = self.topology.shard(keyspace, shard)
        assert found is not None, f"no shard {shard} in {keyspace}"
        conn = self._connect(found, keyspace)
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, keyspace: str, sql: str, params: Sequence[Any] | None = None) -> None:
        """A statement on every serving shard (DDL, as Vitess applies it)."""
        for shard in self.shards(keyspace):
            with self._connect(shard, keyspace) as conn, conn.cursor() as cur:
                cur.execute(sql, params)

    def shard_of(self, keyspace: str, value: Any) -> str:
        return shard_for(value, [s.name for s in self.shards(keyspace)])

    def write(self, keyspace: str, statements: dict[str, list[tuple[str, Sequence[Any]]]]) -> None:
        """Statements per shard, each shard's in one transaction, shards one after another."""
        for shard, todo in statements.items():
            with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
                cur.execute("BEGIN")
                for sql, params in todo:
                    cur.execute(sql, params)
                cur.execute("COMMIT")

    def rows(self, keyspace: str, table: str, columns: str = "*") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for shard in self.shards(keyspace):
            with self._connect(shard, keyspace) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(f"SELECT {columns} FROM {_q(table)}")
                found += cur.fetchall()
        return found

    def position(self, keyspace: str, shard: str) -> str:
        with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            return "MariaDB/" + cur.fetchone()[0]

    # ------------------------------------------------------------------ resharding

    def split_shard(
        self, keyspace: str, source: str, targets: dict[str, int], key_column: str = "id"
    ) -> None:
        """Vitess's Reshard of `source` into `targets` (shard → server index): copy each
        table's rows of a target's key range to it, record the targets' positions, then
        write the journal into the source shard's `_vt.resharding_journal` (its stream sees
        it) and switch the topology. Writers must pause around it, as Vitess stops writes
        to the source while it switches traffic."""
        from google.protobuf import text_format

        from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd

        old = self.topology.shard(keyspace, source)
        assert old is not None
        with self._connect(old, keyspace) as src, src.cursor() as cur:
            cur.execute("SHOW CREATE DATABASE " + _q(keyspace))
            cur.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
            tables = [r[0] for r in cur.fetchall()]
            definitions = {}
            contents = {}
            for table in tables:
                cur.execute(f"SHOW CREATE TABLE {_q(table)}")
                definitions[table] = cur.fetchone()[1]
                cur.execute(f"SELECT * FROM {_q(table)}")
                names = [d[0] for d in cur.description]
                contents[table] = (names, cur.fetchall())
        positions = {}
        for name, index in targets.items():
            with self.server(index) as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {_q(keyspace)}")
                cur.execute(f"CREATE DATABASE {_q(keyspace)} CHARACTER SET utf8mb4")
                cur.execute(f"USE {_q(keyspace)}")
                for table in tables:
                    cur.execute(definitions[table])
                    names, rows = contents[table]
                    if table == "debezium_signal" or key_column not in names:
                        continue
                    at = names.index(key_column)
                    mine = [r for r in rows if in_range(_kid(r[at]), name)]
                    if mine:
                        marks = ", ".join(["%s"] * len(names))
                        cur.executemany(f"INSERT INTO {_q(table)} VALUES ({marks})", mine)
                cur.execute("SELECT @@global.gtid_binlog_pos")
                positions[name] = "MariaDB/" + cur.fetchone()[0]
        journal = bd.Journal(
            id=int(time.time() * 1000),
            migration_type=bd.SHARDS,
            participants=[bd.KeyspaceShard(keyspace=keyspace, shard=source)],
            shard_gtids=[bd.ShardGtid(keyspace=keyspace, shard=n, gtid=p) for n, p in positions.items()],
        )
        keyspaces = self.topology.load()  # the targets serve from here on (writes are paused)
        shards = [s for s in keyspaces[keyspace] if s.name != source]
        shards.append(Shard(source, old.host, old.port, serving=False))
        shards += [Shard(n, "127.0.0.1", self.shard_ports[i]) for n, i in targets.items()]
        keyspaces[keyspace] = sorted(shards, key=lambda s: s.name)
        self.topology.save(keyspaces)
        with self._connect(old) as conn, conn.cursor() as cur:
            cur.execute(
                "INSERT INTO _vt.resharding_journal (id, db_name, val) VALUES (%s, %s, %s)",
                (journal.id, keyspace, text_format.MessageToString(journal)),
            )


def _kid(value: Any) -> bytes:
    from tests.support.vtgate.vindex import keyspace_id

    return keyspace_id(value)


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
