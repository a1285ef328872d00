"""The VTGate test double's four MariaDB shard servers (`vitess`) and the double itself
on fixed ports (`vtgate`), for the Vitess tests and demo."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.mariadb import MariaDB, _sql_string_body
from scripts.services.processes import _port_open
from scripts.services.settings import (
    ADMIN_PASSWORD_ENV,
    ADMIN_USER,
    CDC_PASSWORD_ENV,
    CDC_USER,
    LOCAL,
    PORTS,
    VENV_BIN,
    environment,
)


class VitessShard(MariaDB):
    """One MariaDB server acting as a Vitess shard's primary for the VTGate test double
    (`tests/support/vtgate/`): a binlog and GTIDs of its own, Vitess's `_vt` sidecar
    tables, and the CDC user, which may also write signal rows in any keyspace (a
    test-only server: signal tables live in every keyspace here)."""

    memory = ("64M", "48M")

    def __init__(self, index: int) -> None:
        self.index = index
        self.name = f"vitess-shard-{index}"
        self.server_id = 10 + index

    @property
    def home(self) -> Path:
        return LOCAL / "vitess" / f"shard-{self.index}"

    @property
    def port(self) -> int:
        return PORTS.vitess_shards + self.index - 1

    def after_ready(self) -> None:
        env = environment()
        password = _sql_string_body(env[CDC_PASSWORD_ENV])
        admin_password = _sql_string_body(env[ADMIN_PASSWORD_ENV])
        # The CDC user's INSERT, UPDATE and DELETE are for the signal table of each keyspace
        # (`<keyspace>.debezium_signal`); keyspaces come and go with the tests, so they are
        # granted on *.*, acceptable on a server that exists only for tests.
        sql = f"""
            CREATE DATABASE IF NOT EXISTS `_vt`;
            CREATE TABLE IF NOT EXISTS `_vt`.`heartbeat` (
                keyspaceShard VARBINARY(256) PRIMARY KEY, tabletUid INT UNSIGNED, ts BIGINT UNSIGNED
            );
            CREATE TABLE IF NOT EXISTS `_vt`.`resharding_journal` (
                id BIGINT PRIMARY KEY, db_name VARBINARY(255), val BLOB
            );
            CREATE USER IF NOT EXISTS '{CDC_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';
            GRANT SELECT, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR,
                  INSERT, UPDATE, DELETE ON *.* TO '{CDC_USER}'@'127.0.0.1';
            CREATE USER IF NOT EXISTS '{ADMIN_USER}'@'127.0.0.1' IDENTIFIED BY '{admin_password}';
            GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'127.0.0.1' WITH GRANT OPTION;
        """
        res = subprocess.run(self.admin_cmd(), input=sql, text=True, capture_output=True)
        if res.returncode != 0:
            raise ServiceError(f"{self.name}: bootstrap SQL failed: {res.stderr.strip()}")


class VitessShards(Service):
    """The four shard servers of the VTGate test double: two shards of a keyspace and the
    two a reshard splits one of them into. Started and stopped together."""

    name = "vitess"
    COUNT = 4

    def __init__(self) -> None:
        self.shards = [VitessShard(i) for i in range(1, self.COUNT + 1)]

    def running(self) -> bool:
        return all(s.running() for s in self.shards)

    def start(self) -> bool:
        """All four at once: each takes a few seconds (its first start, longer), which in
        turn would add up."""
        with ThreadPoolExecutor(len(self.shards)) as pool:
            return any(list(pool.map(lambda shard: shard.start(), self.shards)))

    def stop(self, timeout: float = 60.0) -> bool:
        with ThreadPoolExecutor(len(self.shards)) as pool:
            return any(list(pool.map(lambda shard: shard.stop(timeout), self.shards)))

    def describe(self) -> str:
        return f"MariaDB shards on 127.0.0.1:{self.shards[0].port}-{self.shards[-1].port}"


class VTGateDouble(Service):
    """The VTGate test double (tests/support/vtgate) on fixed ports, for the Vitess demo:
    its keyspaces are those of `topology` (the demo writes its own), served by the
    `vitess` shard servers, which it starts first. Tests start doubles of their own."""

    name = "vtgate"
    start_timeout = 30.0

    def __init__(self, vitess: Service | None = None) -> None:
        # The shard servers it starts first: the CLI passes its own `vitess` service.
        self.vitess = vitess if vitess is not None else VitessShards()

    @property
    def topology(self) -> Path:
        return self.home / "topology.json"

    def conflicting_port(self) -> int | None:
        return next((p for p in (PORTS.vtgate_grpc, PORTS.vtgate_mysql) if _port_open(p)), None)

    def start(self) -> bool:
        self.vitess.start()
        return super().start()

    def command(self) -> list[str]:
        return [
            str(VENV_BIN / "python"), "-m", "tests.support.vtgate", "--topology", str(self.topology),
            "--grpc-port", str(PORTS.vtgate_grpc), "--mysql-port", str(PORTS.vtgate_mysql),
        ]  # fmt: skip

    def extra_env(self) -> dict[str, str]:
        return {"TZ": "UTC"}

    def ready(self) -> bool:
        return _port_open(PORTS.vtgate_grpc) and _port_open(PORTS.vtgate_mysql)

    def describe(self) -> str:
        return f"VStream 127.0.0.1:{PORTS.vtgate_grpc}, MySQL protocol 127.0.0.1:{PORTS.vtgate_mysql}"
