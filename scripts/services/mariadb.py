"""The local MariaDB server: its configuration for CDC, first-start install and the
control database, signal table and users it bootstraps."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.processes import _which
from scripts.services.settings import (
    ADMIN_PASSWORD_ENV,
    ADMIN_USER,
    CDC_PASSWORD_ENV,
    CDC_USER,
    CONTROL_DB,
    PORTS,
    SIGNAL_TABLE,
    environment,
)


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


def _sql_string_body(value: str) -> str:
    """Escape a value for a single-quoted MariaDB string literal."""
    return value.replace("\\", "\\\\").replace("'", "''")


def _current_user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
