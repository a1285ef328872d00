"""VTGate's MySQL protocol, as far as the Vitess connector uses it: log in, target a shard
(``USE `keyspace:shard[@type]` ``, COM_INIT_DB, or the handshake's database), and have
every later query passed on unchanged to that shard's server; `SHOW VITESS_SHARDS`
answered from the topology. Session settings (`SET ...`) go to every shard server the
session uses. Results are relayed as the shard server sent them, packet by packet.

Logins are checked as MySQL does (`mysql_native_password`) against the one user the
double knows (the CDC user); others get error 1045."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import socket
import socketserver
import struct
from typing import Any

import pymysql
from pymysql.constants import COMMAND

from tests.support.vtgate.topology import Topology

log = logging.getLogger("vtgate.mysql")

CAPABILITIES = (
    1 | 4 | 8 | 512 | 8192 | 32768 | (1 << 17) | (1 << 19) | (1 << 20) | (1 << 21)
)  # long password/flag, connect with db, 4.1, transactions, secure connection, multi results, plugin auth
_USE = re.compile(r"^\s*use\s+`?([^`]+)`?\s*;?\s*$", re.I)
_SHOW_SHARDS = re.compile(r"^\s*show\s+vitess_shards(?:\s+like\s+'([^']*)')?\s*;?\s*$", re.I)
_SET = re.compile(r"^\s*set\s", re.I)


def _lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def _scramble(password: str, salt: bytes) -> bytes:
    one = hashlib.sha1(password.encode()).digest()
    two = hashlib.sha1(one).digest()
    three = hashlib.sha1(salt + two).digest()
    return bytes(a ^ b for a, b in zip(one, three, strict=True))


class Session(socketserver.BaseRequestHandler):
    server: Any

    def setup(self) -> None:
        self.seq = 0
        self.backends: dict[tuple[str, str], pymysql.Connection] = {}
        self.settings: list[str] = []
        self.target: tuple[str, str | None] | None = None

    # ------------------------------------------------------------------ packets

    def read(self) -> bytes | None:
        payload = b""
        while True:
            head = self._exactly(4)
            if head is None:
                return None
            length = head[0] | head[1] << 8 | head[2] << 16
            self.seq = (head[3] + 1) % 256
            body = self._exactly(length) if length else b""
            if body is None:
                return None
            payload += body
            if length < 0xFFFFFF:
                return payload

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.request.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def write(self, payload: bytes) -> None:
        while True:
            part, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            self.request.sendall(struct.pack("<I", len(part))[:3] + bytes([self.seq]) + part)
            self.seq = (self.seq + 1) % 256
            if len(part) < 0xFFFFFF:
                return

    def ok(self) -> None:
        self.write(b"\x00\x00\x00\x02\x00\x00\x00")

    def error(self, code: int, message: str, state: str = "HY000") -> None:
        self.write(b"\xff" + struct.pack("<H", code) + b"#" + state.encode() + message.encode())

    def eof(self) -> None:
        self.write(b"\xfe\x00\x00\x02\x00")

    # ------------------------------------------------------------------ session

    def handle(self) -> None:
        try:
            if not self.login():
                return
            while (packet := self.read()) is not None:
                self.seq = 1
                command, body = packet[0], packet[1:]
                if command == COMMAND.COM_QUIT:
                    return
                if command == COMMAND.COM_PING:
                    self.ok()
                elif command == COMMAND.COM_INIT_DB:
                    self.use(body.decode())
                elif command == COMMAND.COM_QUERY:
                    self.query(body.decode("utf-8", errors="surrogateescape"))
                else:
                    self.error(1047, f"the VTGate double does not support command {command}")
        except (ConnectionError, OSError):
            return
        finally:
            for conn in self.backends.values():
                with contextlib.suppress(Exception):  # the shard server may be gone
                    conn.close()

    def login(self) -> bool:
        salt = os.urandom(20).replace(b"\x00", b"\x01")
        self.seq = 0
        caps = CAPABILITIES
        self.write(
            b"\x0a8.0.30-Vitess\x00"
            + struct.pack("<I", 1)
            + salt[:8]
            + b"\x00"
            + struct.pack("<H", caps & 0xFFFF)
            + bytes([45])
            + struct.pack("<H", 2)
            + struct.pack("<H", caps >> 16)
            + bytes([21])
            + b"\x00" * 10
            + salt[8:]
            + b"\x00"
            + b"mysql_native_password\x00"
        )
        response = self.read()
        if response is None:
            return False
        client_caps = struct.unpack("<I", response[:4])[0]
        at = 32
        end = response.index(b"\x00", at)
        user = response[at:end].decode()
        at = end + 1
        if client_caps & (1 << 21):
            length = response[at]
            at += 1
        else:
            length = response[at]
            at += 1
        token = response[at : at + length]
        at += length
        database = None
        if client_caps & 8 and at < len(response):
            end = response.index(b"\x00", at)
            database = response[at:end].decode() or None
        if user != self.server.user or token != _scramble(self.server.password, salt):
            self.error(1045, f"Access denied for user '{user}'", "28000")
            return False
        self.ok()
        if database:
            self.target = _parse_target(database)
        return True

    def use(self, target: str) -> None:
        keyspace, shard = _parse_target(target)
        if keyspace not in self.server.topology.load():
            self.error(1049, f"Unknown database '{keyspace}'", "42000")
            return
        self.target = (keyspace, shard)
        self.ok()

    def query(self, sql: str) -> None:
        used = _USE.match(sql)
        if used:
            self.use(used.group(1))
            return
        shards = _SHOW_SHARDS.match(sql)
        if shards:
            self.show_shards(shards.group(1))
            return
        if _SET.match(sql):
            self.settings.append(sql)
            for conn in self.backends.values():
                conn.query(sql)
            self.ok()
            return
        try:
            backend = self.backend()
        except LookupError as exc:
            self.error(1105, str(exc))
            return
        self.relay(backend, sql)

    def backend(self) -> pymysql.Connection:
        if self.target is None:
            raise LookupError("no keyspace selected: USE `keyspace:shard` first")
        keyspace, shard = self.target
        shards = self.server.topology.shards(keyspace, serving_only=False)
        if shard is None:
            if len(shards) != 1:
                raise LookupError(
                    f"the VTGate double needs a shard target (USE `{keyspace}:<shard>`) for keyspace {keyspace}"
                )
            shard = shards[0].name
        found = next((s for s in shards if s.name == shard), None)
        if found is None:
            raise LookupError(f"no shard {shard} in keyspace {keyspace}")
        conn = self.backends.get((keyspace, shard))
        if conn is None:
            conn = pymysql.connect(
                host=found.host, port=found.port, user=self.server.user, password=self.server.password,
                database=keyspace, autocommit=True,
            )  # fmt: skip
            for setting in self.settings:
                conn.query(setting)
            self.backends[(keyspace, shard)] = conn
        return conn

    def relay(self, conn: pymysql.Connection, sql: str) -> None:
        """The shard server's answer to `sql`, packet by packet."""
        try:
            conn._execute_command(COMMAND.COM_QUERY, sql.encode("utf-8", errors="surrogateescape"))
            first = conn._read_packet()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 1105
            self.error(code, str(exc.args[-1]) if exc.args else str(exc))
            return
        data = first.get_all_data()
        self.write(data)
        if data[0] in (0x00, 0xFF) or (data[0] == 0xFB):
            return
        count, _ = _read_lenenc(data, 0)
        for _ in range(count):
            self.write(conn._read_packet().get_all_data())
        self.write(conn._read_packet().get_all_data())  # EOF after the column definitions
        while True:
            try:
                packet = conn._read_packet().get_all_data()
            except pymysql.err.MySQLError as exc:
                self.error(exc.args[0], str(exc.args[-1]))
                return
            self.write(packet)
            if packet[0] == 0xFE and len(packet) < 9:
                return

    def show_shards(self, pattern: str | None) -> None:
        names = [
            f"{ks}/{s.name}"
            for ks, shards in sorted(self.server.topology.load().items())
            for s in shards
            if s.serving
        ]
        if pattern:
            regex = re.compile("^" + re.escape(pattern).replace("%", ".*").replace("_", ".") + "$")
            names = [n for n in names if regex.match(n)]
        self.write(_lenenc(1))
        self.write(
            b"\x03def\x00\x00\x00\x06Shards\x00\x0c" + struct.pack("<H", 33) + struct.pack("<I", 256)
            + b"\xfd" + struct.pack("<H", 1) + b"\x00\x00\x00"
        )  # fmt: skip
        self.eof()
        for name in names:
            encoded = name.encode()
            self.write(_lenenc(len(encoded)) + encoded)
        self.eof()


def _read_lenenc(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 251:
        return first, at + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + size], "little"), at + 1 + size


def _parse_target(target: str) -> tuple[str, str | None]:
    """`keyspace[:|/]shard[@tablet_type]`, `keyspace[@type]`."""
    target = target.rsplit("@", 1)[0] if "@" in target else target
    for sep in (":", "/"):
        if sep in target:
            keyspace, shard = target.split(sep, 1)
            return keyspace, shard
    return target, None


class Router(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, topology: Topology, user: str, password: str) -> None:
        super().__init__(("127.0.0.1", port), Session)
        self.topology, self.user, self.password = topology, user, password
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
