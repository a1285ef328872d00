"""Start, stop and check Tidemark's local services: MariaDB, Kafka (KRaft) and Airflow.

Everything runs on loopback from the project's own installs (Debian's MariaDB, the
Maven-fetched Kafka jars, the .venv's Airflow) with its data under the ignored
``.local/`` folder, so a developer machine and CI behave the same and nothing touches a
system-wide service.

    python -m scripts.services up [NAME ...]      start (idempotent) and wait until ready
    python -m scripts.services down [NAME ...]    stop; no process of ours is left
    python -m scripts.services status
    python -m scripts.services env                print the environment the stack uses
    python -m scripts.services run NAME ... -- CMD
        start what is not running, run CMD with the stack's environment, then stop
        only what this call started (TIDEMARK_KEEP_SERVICES=1 keeps them running)

Names: mariadb, vitess (the VTGate test double's four MariaDB shard servers), vtgate (the
double itself on fixed ports, for the Vitess demo; starts vitess), kafka,
airflow-db (metadata database migrated, no process), airflow (``airflow standalone``:
api-server, scheduler, dag-processor, triggerer).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
JARS = ROOT / ".jars"
VENV_BIN = ROOT / ".venv" / "bin"


class ServiceError(RuntimeError):
    """A service could not be started or checked; the message says what to do."""


@dataclass(frozen=True)
class Ports:
    mariadb: int = int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307"))
    kafka: int = int(os.environ.get("TIDEMARK_KAFKA_PORT", "9092"))
    kafka_controller: int = int(os.environ.get("TIDEMARK_KAFKA_CONTROLLER_PORT", "9093"))
    airflow: int = int(os.environ.get("TIDEMARK_AIRFLOW_PORT", "8080"))
    # The VTGate test double's shard servers: this port and the three after it.
    vitess_shards: int = int(os.environ.get("TIDEMARK_VITESS_SHARD_PORT", "3311"))
    # The VTGate double run as a service (the Vitess demo): VStream over gRPC, MySQL protocol.
    vtgate_grpc: int = int(os.environ.get("TIDEMARK_VTGATE_GRPC_PORT", "15991"))
    vtgate_mysql: int = int(os.environ.get("TIDEMARK_VTGATE_MYSQL_PORT", "15306"))


PORTS = Ports()

# Development credentials of the local stack only. Production credentials come from
# Airflow connections or environment variables (see README, "Configuration").
CDC_USER = "tidemark"
CDC_PASSWORD_ENV = "TIDEMARK_DB_PASSWORD"
CDC_PASSWORD_DEFAULT = "tidemark-dev"
ADMIN_USER = "tidemark_admin"  # creates schemas and workloads in tests and the demo
ADMIN_PASSWORD_ENV = "TIDEMARK_ADMIN_PASSWORD"
ADMIN_PASSWORD_DEFAULT = "tidemark-admin-dev"
CONTROL_DB = "tidemark"
# The demo connector's Airflow connection (airflow.conn.id tidemark_demo_mariadb).
DEMO_SOURCE_CONN_ENV = "AIRFLOW_CONN_TIDEMARK_DEMO_MARIADB"
DEMO_VITESS_CONN_ENV = "AIRFLOW_CONN_TIDEMARK_DEMO_VITESS"  # connectors/demo_vitess.yaml's
# The local Airflow's UI and REST API login (SimpleAuthManager, one admin user).
AIRFLOW_USER = "admin"
AIRFLOW_PASSWORD_ENV = "TIDEMARK_AIRFLOW_PASSWORD"
AIRFLOW_PASSWORD_DEFAULT = "tidemark-airflow-dev"
SIGNAL_TABLE = "debezium_signal"


def environment() -> dict[str, str]:
    """The variables every tool of the local stack (tests, Airflow, Spark jobs) reads."""
    airflow_home = LOCAL / "airflow"
    return {
        "TIDEMARK_ROOT": str(ROOT),
        "TIDEMARK_MARIADB_HOST": "127.0.0.1",
        "TIDEMARK_MARIADB_PORT": str(PORTS.mariadb),
        "TIDEMARK_MARIADB_SOCKET": str(LOCAL / "mariadb" / "run" / "mariadbd.sock"),
        "TIDEMARK_DB_USER": CDC_USER,
        CDC_PASSWORD_ENV: os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
        "TIDEMARK_ADMIN_USER": ADMIN_USER,
        ADMIN_PASSWORD_ENV: os.environ.get(ADMIN_PASSWORD_ENV, ADMIN_PASSWORD_DEFAULT),
        "PATH": os.pathsep.join((str(VENV_BIN), os.environ.get("PATH", ""))),
        "TIDEMARK_KAFKA_BOOTSTRAP": f"127.0.0.1:{PORTS.kafka}",
        "TIDEMARK_VITESS_SHARD_PORT": str(PORTS.vitess_shards),
        "TIDEMARK_SPARK_JARS_DIR": str(JARS / "spark"),
        "TIDEMARK_AIRFLOW_URL": f"http://127.0.0.1:{PORTS.airflow}",
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # A 2-core development machine: a few LocalExecutor workers, not Airflow's 32.
        "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "4"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{PORTS.airflow}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(PORTS.airflow),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(airflow_home / "logs"),
        # Login of the UI and the REST API: a fixed development password (written to the
        # passwords file by `Airflow.prepare`) instead of one generated and printed.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(airflow_home / "passwords.json"),
        "TIDEMARK_AIRFLOW_USER": AIRFLOW_USER,
        AIRFLOW_PASSWORD_ENV: os.environ.get(AIRFLOW_PASSWORD_ENV, AIRFLOW_PASSWORD_DEFAULT),
        # Airflow connections of the local stack: the demo connector's source (its
        # password is masked in task logs) and Spark in local mode for the jobs.
        DEMO_SOURCE_CONN_ENV: json.dumps(
            {
                "conn_type": "mysql",
                "host": "127.0.0.1",
                "port": PORTS.mariadb,
                "login": CDC_USER,
                "password": os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
            }
        ),
        DEMO_VITESS_CONN_ENV: json.dumps(
            {
                "conn_type": "generic",
                "host": "127.0.0.1",
                "port": PORTS.vtgate_grpc,
                "login": CDC_USER,
                "password": os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
            }
        ),
        "TIDEMARK_VTGATE_GRPC_PORT": str(PORTS.vtgate_grpc),
        "TIDEMARK_VTGATE_MYSQL_PORT": str(PORTS.vtgate_mysql),
        "AIRFLOW_CONN_TIDEMARK_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "TIDEMARK_CONNECTORS_DIR": os.environ.get("TIDEMARK_CONNECTORS_DIR", str(ROOT / "connectors")),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


def admin_connection(database: str | None = None):
    """A connection as the local stack's admin user (creates schemas and workloads)."""
    import pymysql

    env = environment()
    return pymysql.connect(
        host="127.0.0.1",
        port=PORTS.mariadb,
        user=ADMIN_USER,
        password=env[ADMIN_PASSWORD_ENV],
        database=database,
        autocommit=True,
        init_command="SET time_zone = '+00:00'",
    )


# ---------------------------------------------------------------------------- helpers


def _which(name: str, *extra_dirs: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        candidate = Path(d) / name
        if candidate.exists():
            return str(candidate)
    raise ServiceError(f"'{name}' is not installed: run `make install` (scripts/install_system.sh)")


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped) is not alive for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return True


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (no dependency: `make down` may run without
    the project's virtualenv)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` (not `pid` itself)."""
    return _descendants_of_any({pid})


def _descendants_of_any(pids: set[int]) -> set[int]:
    children = _children()
    found: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _end_processes(pids: set[int], grace: float) -> None:
    """SIGTERM the live ones, wait up to `grace` seconds, SIGKILL what is left, and
    return once none lives (a process is seen through its start time, so a pid reused
    by a new process is left alone)."""
    started = {pid: _start_time(pid) for pid in pids}
    alive = lambda pid: _pid_alive(pid) and _start_time(pid) == started[pid]  # noqa: E731
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        living = [pid for pid in pids if alive(pid)]
        for pid in living:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while living and time.monotonic() < deadline:
            living = [pid for pid in living if alive(pid)]
            time.sleep(0.1)
        if not living:
            return


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Service:
    """A daemon we start ourselves: pid file, log file, readiness check."""

    name = ""
    start_timeout = 60.0

    @property
    def home(self) -> Path:
        return LOCAL / self.name

    @property
    def pid_file(self) -> Path:
        return self.home / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "log" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) else None

    def running(self) -> bool:
        return self.pid() is not None

    def ready(self) -> bool:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Create configuration and data folders (idempotent)."""

    def after_ready(self) -> None:
        """One-time setup that needs the running service (idempotent)."""

    def conflicting_port(self) -> int | None:
        return None

    def start(self) -> bool:
        """Start if not running; return True when this call started it."""
        if self.running():
            self.wait_ready()
            self.after_ready()
            return False
        port = self.conflicting_port()
        if port is not None and _port_open(port):
            raise ServiceError(
                f"{self.name}: port {port} on 127.0.0.1 is taken by another process; stop it or "
                f"choose another port (see `python -m scripts.services env`)"
            )
        self.prepare()
        for d in (self.pid_file.parent, self.log_file.parent):
            d.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **environment(), **self.extra_env()}
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                env=env,
                start_new_session=True,  # its own process group, so `down` stops all of it
            )
        self.pid_file.write_text(str(proc.pid))
        try:
            self.wait_ready(proc)
        except ServiceError:
            self.stop()
            raise
        self.after_ready()
        return True

    def extra_env(self) -> dict[str, str]:
        return {}

    def wait_ready(self, proc: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServiceError(
                    f"{self.name} exited with code {proc.returncode} while starting; "
                    f"last lines of {self.log_file}:\n{_tail(self.log_file)}"
                )
            if self.ready():
                return
            time.sleep(0.5)
        raise ServiceError(
            f"{self.name} did not become ready within {self.start_timeout:.0f}s; "
            f"last lines of {self.log_file}:\n{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the service and every process it started, and return only when all of
        them have exited; True when something was running. A service's processes may
        leave its process group (Airflow's task runners start sessions of their own, and
        the streamer's operator starts it in one), so its whole process tree is taken
        before the stop request, and what is left of it when the service has stopped gets
        SIGTERM, then SIGKILL."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        tree = _descendants(pid)
        self.request_stop(pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.2)
        if _pid_alive(pid):
            print(f"{self.name}: did not stop within {timeout:.0f}s, killing it", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # also ends helpers left in the group
        while _pid_alive(pid):
            time.sleep(0.1)
        _end_processes(tree | _descendants_of_any(tree), grace=min(timeout, 30.0))
        self.pid_file.unlink(missing_ok=True)
        return True

    def request_stop(self, pid: int) -> None:
        """Ask the service to shut down cleanly; `stop` waits and then kills what is left."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)

    def describe(self) -> str:
        return ""


# ---------------------------------------------------------------------------- MariaDB


class MariaDB(Service):
    """MariaDB from Debian's packages, configured for row-based CDC with GTIDs."""

    name = "mariadb"
    start_timeout = 90.0
    server_id = 1
    memory = ("512M", "256M")  # InnoDB buffer pool, redo log

    @property
    def port(self) -> int:
        return PORTS.mariadb

    @property
    def socket(self) -> Path:
        return self.home / "run" / "mariadbd.sock"

    @property
    def config(self) -> Path:
        return self.home / "my.cnf"

    def conflicting_port(self) -> int | None:
        return self.port

    def prepare(self) -> None:
        data = self.home / "data"
        for d in (self.home / "run", self.home / "log", self.home / "binlog", self.home / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            "\n".join(
                [
                    "[client-server]",
                    f"socket = {self.socket}",
                    f"port = {self.port}",
                    "",
                    "[mariadbd]",
                    f"datadir = {data}",
                    f"tmpdir = {self.home / 'tmp'}",
                    f"pid-file = {self.home / 'run' / 'mariadbd.pidfile'}",
                    "bind-address = 127.0.0.1",
                    "skip-name-resolve",
                    f"log-error = {self.log_file}",
                    # CDC: row events with full images and full table-map metadata, GTIDs.
                    f"server_id = {self.server_id}",
                    f"log_bin = {self.home / 'binlog' / 'mariadb-bin'}",
                    "binlog_format = ROW",
                    "binlog_row_image = FULL",
                    "binlog_row_metadata = FULL",
                    "gtid_strict_mode = ON",
                    "log_slave_updates = ON",
                    "binlog_expire_logs_seconds = 604800",
                    "character_set_server = utf8mb4",
                    "collation_server = utf8mb4_general_ci",
                    # Small footprint for a 2-core development machine.
                    f"innodb_buffer_pool_size = {self.memory[0]}",
                    f"innodb_log_file_size = {self.memory[1]}",
                    "innodb_flush_log_at_trx_commit = 2",
                    "sync_binlog = 0",
                    "max_connections = 200",
                    "",
                ]
            )
        )
        if not (data / "mysql").is_dir():
            install_db = _which("mariadb-install-db", "/usr/bin", "/usr/sbin")
            subprocess.run(
                [
                    install_db,
                    f"--defaults-file={self.config}",
                    f"--user={_current_user()}",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

    def command(self) -> list[str]:
        return [
            _which("mariadbd", "/usr/sbin"),
            f"--defaults-file={self.config}",
            f"--user={_current_user()}",
        ]

    def ready(self) -> bool:
        if not self.socket.exists():
            return False
        res = subprocess.run(
            self.admin_cmd("mariadb-admin") + ["--connect-timeout=2", "ping"],
            capture_output=True,
        )
        return res.returncode == 0

    def admin_cmd(self, tool: str = "mariadb") -> list[str]:
        """A client command as the local root over the Unix socket (no password)."""
        return [_which(tool, "/usr/bin"), f"--socket={self.socket}", "--user=root"]

    def request_stop(self, pid: int) -> None:
        res = subprocess.run([*self.admin_cmd("mariadb-admin"), "shutdown"], capture_output=True)
        if res.returncode != 0:
            super().request_stop(pid)

    def after_ready(self) -> None:
        env = environment()
        password = _sql_string_body(env[CDC_PASSWORD_ENV])
        admin_password = _sql_string_body(env[ADMIN_PASSWORD_ENV])
        sql = f"""
            CREATE DATABASE IF NOT EXISTS `{CONTROL_DB}`;
            CREATE TABLE IF NOT EXISTS `{CONTROL_DB}`.`{SIGNAL_TABLE}` (
                id VARCHAR(42) PRIMARY KEY,
                type VARCHAR(32) NOT NULL,
                data VARCHAR(2048) NULL
            );
            CREATE USER IF NOT EXISTS '{CDC_USER}'@'127.0.0.1' IDENTIFIED BY '{password}';
            CREATE USER IF NOT EXISTS '{CDC_USER}'@'localhost' IDENTIFIED BY '{password}';
            GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT,
                  BINLOG MONITOR, SLAVE MONITOR ON *.* TO '{CDC_USER}'@'127.0.0.1', '{CDC_USER}'@'localhost';
            GRANT INSERT, UPDATE, DELETE ON `{CONTROL_DB}`.`{SIGNAL_TABLE}`
                  TO '{CDC_USER}'@'127.0.0.1', '{CDC_USER}'@'localhost';
            CREATE USER IF NOT EXISTS '{ADMIN_USER}'@'127.0.0.1' IDENTIFIED BY '{admin_password}';
            GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'127.0.0.1' WITH GRANT OPTION;
        """
        res = subprocess.run(self.admin_cmd(), input=sql, text=True, capture_output=True)
        if res.returncode != 0:
            raise ServiceError(f"mariadb: bootstrap SQL failed: {res.stderr.strip()}")

    def describe(self) -> str:
        return f"127.0.0.1:{self.port} (socket {self.socket})"


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

    @property
    def topology(self) -> Path:
        return self.home / "topology.json"

    def conflicting_port(self) -> int | None:
        return next((p for p in (PORTS.vtgate_grpc, PORTS.vtgate_mysql) if _port_open(p)), None)

    def start(self) -> bool:
        SERVICES["vitess"].start()
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


def _sql_string_body(value: str) -> str:
    """Escape a value for a single-quoted MariaDB string literal."""
    return value.replace("\\", "\\\\").replace("'", "''")


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


# ---------------------------------------------------------------------------- Kafka


class Kafka(Service):
    """A single-node Apache Kafka broker in KRaft mode, run from the Maven-fetched jars."""

    name = "kafka"
    start_timeout = 90.0

    def conflicting_port(self) -> int | None:
        for port in (PORTS.kafka, PORTS.kafka_controller):
            if _port_open(port):
                return port
        return None

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"

    def _java(self) -> list[str]:
        jars = JARS / "kafka"
        if not any(jars.glob("kafka_*.jar")):
            raise ServiceError("kafka: broker jars missing in .jars/kafka; run `make install`")
        return [_which("java"), "-cp", f"{jars}/*"]

    def prepare(self) -> None:
        data = self.home / "data"
        (self.home / "log").mkdir(parents=True, exist_ok=True)
        self.properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{PORTS.kafka_controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{PORTS.kafka},"
                    f"CONTROLLER://127.0.0.1:{PORTS.kafka_controller}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{PORTS.kafka}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    "",
                ]
            )
        )
        (self.home / "log4j2.properties").write_text(
            "\n".join(
                [
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.out.ref = out",
                    "appender.out.type = Console",
                    "appender.out.name = out",
                    "appender.out.layout.type = PatternLayout",
                    "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                    "logger.kafka.name = kafka",
                    "logger.kafka.level = INFO",
                    "logger.state.name = state.change.logger",
                    "logger.state.level = WARN",
                    "",
                ]
            )
        )
        if not (data / "meta.properties").exists():
            data.mkdir(parents=True, exist_ok=True)
            # StorageTool wants the cluster id as a URL-safe base64 UUID, which begins with
            # "-" one time in 64: given as `--cluster-id=...`, it is never read as an option.
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            res = subprocess.run(
                self._java()
                + [
                    f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={cluster_id}",
                    "-c",
                    str(self.properties),
                ],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise ServiceError(f"kafka: formatting storage failed:\n{res.stdout}\n{res.stderr}")

    def command(self) -> list[str]:
        return self._java()[:1] + [
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'log'}",
            "-cp",
            f"{JARS / 'kafka'}/*",
            "kafka.Kafka",
            str(self.properties),
        ]

    def ready(self) -> bool:
        if not _port_open(PORTS.kafka):
            return False
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:  # bootstrap without the venv: the port is the best we have
            return True
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{PORTS.kafka}", "log_level": 0})
        try:
            meta = admin.list_topics(timeout=2)
        except Exception:
            return False
        return len(meta.brokers) == 1 and meta.controller_id >= 0

    def describe(self) -> str:
        return f"127.0.0.1:{PORTS.kafka} (KRaft controller 127.0.0.1:{PORTS.kafka_controller})"


# ---------------------------------------------------------------------------- Airflow


def _airflow_bin() -> str:
    path = VENV_BIN / "airflow"
    if not path.exists():
        raise ServiceError("airflow is not installed in .venv; run `make install`")
    return str(path)


class AirflowDB(Service):
    """Airflow's SQLite metadata database, migrated to the installed Airflow's schema."""

    name = "airflow-db"

    @property
    def home(self) -> Path:
        return LOCAL / "airflow"

    @property
    def stamp(self) -> Path:
        return self.home / ".migrated"

    def _want(self) -> str:
        import importlib.metadata

        try:
            return importlib.metadata.version("apache-airflow-core")
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def running(self) -> bool:
        return (
            self.stamp.exists()
            and self.stamp.read_text() == self._want()
            and (self.home / "airflow.db").exists()
        )

    def start(self) -> bool:
        if self.running():
            return False
        self.home.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            [_airflow_bin(), "db", "migrate"],
            env={**os.environ, **environment()},
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise ServiceError(f"airflow db migrate failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        self.stamp.write_text(self._want())
        return False  # nothing to stop afterwards

    def stop(self, timeout: float = 60.0) -> bool:
        return False

    def describe(self) -> str:
        return str(self.home / "airflow.db")


class Airflow(Service):
    """``airflow standalone`` (api-server, scheduler, dag-processor, triggerer).

    `extra` is environment on top of the stack's (the tests add their DAG bundle and a
    connectors folder of their own). It is recorded next to the pid file: asking for
    extras from an Airflow already running without the same ones is an error, since its
    processes cannot be changed from outside."""

    name = "airflow"
    start_timeout = 180.0

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.extra = dict(extra or {})

    @property
    def home(self) -> Path:
        return LOCAL / "airflow"

    @property
    def extra_file(self) -> Path:
        return self.home / "run" / "airflow.extra-env.json"

    def conflicting_port(self) -> int | None:
        return PORTS.airflow

    def extra_env(self) -> dict[str, str]:
        return self.extra

    def start(self) -> bool:
        if self.extra and self.running():
            try:
                running_with = json.loads(self.extra_file.read_text())
            except (OSError, ValueError):
                running_with = {}
            if running_with != self.extra:
                raise ServiceError(
                    f"airflow is already running with another configuration ({self.extra_file}); stop it "
                    "with `python -m scripts.services down airflow` and start again"
                )
        started = super().start()
        if started:
            self.extra_file.write_text(json.dumps(self.extra, sort_keys=True))
        return started

    def stop(self, timeout: float = 60.0) -> bool:
        stopped = super().stop(timeout)
        self.extra_file.unlink(missing_ok=True)
        return stopped

    def prepare(self) -> None:
        AirflowDB().start()
        # The login's password: SimpleAuthManager keeps a user's password once the file
        # names the user, so the development password is written before each start.
        env = environment()
        passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
        passwords.write_text(json.dumps({AIRFLOW_USER: env[AIRFLOW_PASSWORD_ENV]}) + "\n")
        passwords.chmod(0o600)

    def command(self) -> list[str]:
        return [_airflow_bin(), "standalone"]

    def ready(self) -> bool:
        url = f"http://127.0.0.1:{PORTS.airflow}/api/v2/monitor/health"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                body = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return body.get("metadatabase", {}).get("status") == "healthy"

    def describe(self) -> str:
        return f"http://127.0.0.1:{PORTS.airflow}"


SERVICES: dict[str, Service] = {
    s.name: s for s in (MariaDB(), VitessShards(), VTGateDouble(), Kafka(), AirflowDB(), Airflow())
}
DEFAULT_UP = ["mariadb", "kafka", "airflow"]


def _select(names: list[str], default: list[str]) -> list[Service]:
    unknown = [n for n in names if n not in SERVICES]
    if unknown:
        raise ServiceError(f"unknown service(s) {unknown}; known: {sorted(SERVICES)}")
    return [SERVICES[n] for n in (names or default)]


def up(names: list[str], started: list[Service] | None = None) -> list[Service]:
    """Start what is not running; `started` (given by `run`) collects each as it starts,
    so a later service's failure still leaves the earlier ones to be stopped."""
    started = [] if started is None else started
    for svc in _select(names, DEFAULT_UP):
        t0 = time.monotonic()
        if svc.start():
            started.append(svc)
            print(f"{svc.name}: started in {time.monotonic() - t0:.1f}s  {svc.describe()}")
        else:
            print(f"{svc.name}: ready  {svc.describe()}")
    return started


def down(names: list[str]) -> None:
    for svc in reversed(_select(names, list(SERVICES))):
        if svc.stop():
            print(f"{svc.name}: stopped")


def status() -> int:
    for svc in SERVICES.values():
        state = "running" if svc.running() else "stopped"
        if isinstance(svc, AirflowDB):
            state = "migrated" if svc.running() else "not migrated"
        print(f"{svc.name:11s} {state:13s} {svc.describe()}")
    return 0


def run(names: list[str], cmd: list[str]) -> int:
    started: list[Service] = []
    try:
        up(names, started)  # (one that fails to start leaves those before it in `started`)
        env = {**os.environ, **environment()}
        return subprocess.call(cmd, env=env)
    finally:
        if os.environ.get("TIDEMARK_KEEP_SERVICES") != "1":
            for svc in reversed(started):
                svc.stop()
                print(f"{svc.name}: stopped (started for this run)")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    verb, rest = argv[0], argv[1:]
    try:
        if verb == "up":
            up(rest)
            return 0
        if verb == "down":
            down(rest)
            return 0
        if verb == "status":
            return status()
        if verb == "env":
            for k, v in environment().items():
                secret = k in (
                    CDC_PASSWORD_ENV,
                    ADMIN_PASSWORD_ENV,
                    AIRFLOW_PASSWORD_ENV,
                    DEMO_SOURCE_CONN_ENV,
                    DEMO_VITESS_CONN_ENV,
                )
                print(f"export {k}={'***' if secret else shlex.quote(v)}")  # never print a secret
            return 0
        if verb == "run":
            if "--" not in rest:
                print("usage: run NAME ... -- COMMAND", file=sys.stderr)
                return 2
            i = rest.index("--")
            return run(rest[:i], rest[i + 1 :])
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
