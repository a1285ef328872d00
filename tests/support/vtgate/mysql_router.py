"""VTGate's MySQL protocol, as far as a CDC client uses it (`vtgate/plugin_mysql_server`).

A client logs in as the CDC user (`mysql_native_password`, checked against the password
the double is configured with; anything else gets error 1045), targets a shard with
``USE `keyspace:shard[@type]` `` (or `keyspace/shard`, as the handshake's database, or
with COM_INIT_DB), and every later statement goes unchanged to that shard's server,
VTGate's bypass routing. The router keeps one connection per shard and client session,
opened as the CDC user with the client's character set; SET statements are remembered
and replayed on connections opened later. Answers are relayed as the shard server sent
them, packet by packet.

The router answers itself: `SHOW VITESS_SHARDS [LIKE 'ks/%']` (one column `Shards`, rows
`ks/-80`: the serving shards), `SHOW VITESS_TABLETS`, and `SHOW DATABASES` (keyspaces).
A bare keyspace target of several shards takes SHOW statements (sent to its first shard,
as VTGate sends them to any) but no data statements: the double has no query planner.
Writes to a shard a reshard took out of service fail as Vitess's denied tables do."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import socketserver
import struct
from typing import Any

from tests.support.vtgate import mysql_packets as mp
from tests.support.vtgate.mysql_packets import Backend, PacketIO, eof_packet, err_packet, ok_packet
from tests.support.vtgate.topology import Topology

log = logging.getLogger("vtgate.mysql")

COM_QUIT, COM_INIT_DB, COM_QUERY, COM_PING = 1, 2, 3, 14
_COMMENTS = re.compile(r"^\s*(?:(?:/\*.*?\*/|#[^\n]*\n|--\s[^\n]*\n)\s*)*", re.S)
_USE = re.compile(r"use\s+(`(?:[^`]|``)+`|\S+?)\s*;?\s*", re.I | re.S)
_SHOW_SHARDS = re.compile(r"show\s+vitess_shards(?:\s+like\s+'((?:[^'\\]|\\.|'')*)')?\s*;?\s*", re.I | re.S)
_SHOW_TABLETS = re.compile(r"show\s+vitess_tablets\s*;?\s*", re.I)
_SHOW_DATABASES = re.compile(r"show\s+(?:databases|schemas|keyspaces)\s*;?\s*", re.I)
_SET = re.compile(r"set\s", re.I)
_WRITE = re.compile(r"(insert|update|delete|replace)\b", re.I)
_SHOW = re.compile(r"(show|describe|desc|explain)\b", re.I)
_TABLET_TYPES = {"primary", "master", "replica", "rdonly"}


def parse_target(target: str) -> tuple[str, str | None, str]:
    """`keyspace[:|/]shard[@tablet_type]` or `keyspace[@tablet_type]` (topoproto.ParseDestination)."""
    tablet_type = "primary"
    if "@" in target:
        target, _, tablet_type = target.rpartition("@")
    cut = max(target.rfind(":"), target.rfind("/"))
    if cut >= 0:
        return target[:cut], target[cut + 1 :], tablet_type.lower()
    return target, None, tablet_type.lower()


def _like(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out, i = out + re.escape(pattern[i + 1]), i + 2
            continue
        out += ".*" if ch == "%" else "." if ch == "_" else re.escape(ch)
        i += 1
    return re.compile(out + r"\Z", re.S | re.I)


class Session(socketserver.BaseRequestHandler):
    """One client connection."""

    server: Router

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.io = PacketIO(self.request)
        self.backends: dict[tuple[str, str], Backend] = {}
        self.settings: list[str] = []
        self.target: tuple[str, str | None] | None = None
        self.caps, self.charset = 0, 45

    def handle(self) -> None:
        try:
            if not self.login():
                return
            while (packet := self.io.read()) is not None:
                command, body = packet[0], packet[1:]
                if command == COM_QUIT:
                    return
                if command == COM_PING:
                    self.io.write(ok_packet())
                elif command == COM_INIT_DB:
                    self.use(body.decode(errors="replace"))
                elif command == COM_QUERY:
                    self.query(body.decode("utf-8", errors="surrogateescape"))
                else:
                    self.io.write(
                        err_packet(1047, f"command handling not implemented yet: {command}", "08S01")
                    )
        except OSError:
            return
        finally:
            for backend in self.backends.values():
                with contextlib.suppress(OSError):
                    backend.close()

    def login(self) -> bool:
        salt = mp.new_salt()
        self.io.seq = 0
        self.io.write(
            b"\x0a8.0.30-Vitess\x00" + struct.pack("<I", 1) + salt[:8] + b"\x00"
            + struct.pack("<H", mp.CAPABILITIES & 0xFFFF) + bytes([45]) + struct.pack("<H", mp.SERVER_STATUS_AUTOCOMMIT)
            + struct.pack("<H", mp.CAPABILITIES >> 16) + bytes([21]) + b"\x00" * 10 + salt[8:] + b"\x00"
            + b"mysql_native_password\x00"
        )  # fmt: skip
        packet = self.io.read()
        if packet is None:
            return False
        hello = mp.parse_handshake_response(packet)
        self.caps, self.charset = hello["caps"], hello["charset"]
        if hello["user"] != self.server.user or hello["token"] != mp.scramble(self.server.password, salt):
            using = "YES" if hello["token"] else "NO"
            host = self.client_address[0]
            self.io.write(err_packet(1045, f"Access denied for user '{hello['user']}'@'{host}' (using password: {using})", "28000"))  # fmt: skip
            return False
        if hello["database"]:
            problem = self._target(hello["database"])
            if problem is not None:
                self.io.write(err_packet(*problem))
                return False
        self.io.write(ok_packet())
        return True

    # ------------------------------------------------------------------ statements

    def use(self, target: str) -> None:
        problem = self._target(target.strip().strip("`").replace("``", "`"))
        self.io.write(err_packet(*problem) if problem else ok_packet())

    def _target(self, target: str) -> tuple[int, str, str] | None:
        keyspace, shard, tablet_type = parse_target(target)
        if tablet_type not in _TABLET_TYPES:
            return 1105, f"invalid tablet type: {tablet_type}", "HY000"
        if keyspace not in self.server.topology.load():
            return 1049, f"Unknown database '{keyspace}'", "42000"
        self.target = (keyspace, shard)
        return None

    def query(self, sql: str) -> None:
        text = _COMMENTS.sub("", sql, count=1)
        if found := _USE.fullmatch(text):
            self.use(found.group(1))
        elif found := _SHOW_SHARDS.fullmatch(text):
            self.show_shards(found.group(1))
        elif _SHOW_TABLETS.fullmatch(text):
            self.show_tablets()
        elif _SHOW_DATABASES.fullmatch(text):
            self.rows(["Database"], [[k] for k in self.server.topology.keyspaces()])
        elif _SET.match(text):
            self.set(sql)
        else:
            backend = self.backend(sql, text)
            if backend is not None:
                self.relay(backend, sql)

    def set(self, sql: str) -> None:
        """A session setting: on the targeted shard (its answer relayed), remembered for
        the connections opened later, and applied to the others already open."""
        current = self.backend(sql, sql, quiet=True)
        if current is None:
            self.settings.append(sql)
            self.io.write(ok_packet())
            return
        if self.relay(current, sql):
            self.settings.append(sql)
            for backend in self.backends.values():
                if backend is not current:
                    backend.query(sql)

    def backend(self, sql: str, text: str, quiet: bool = False) -> Backend | None:
        """The targeted shard's connection, or None after sending the client an error."""

        def refuse(message: str, code: int = 1105) -> None:
            if not quiet:
                self.io.write(err_packet(code, message))

        if self.target is None:
            return refuse("No database selected: use keyspace:shard (USE `keyspace:-80`) first", 1046)
        keyspace, shard = self.target
        shards = self.server.topology.shards(keyspace, serving_only=False)
        if shard is None:
            serving = [s for s in shards if s.serving]
            if len(serving) == 1 or (serving and _SHOW.match(text)):
                shard = serving[0].name
            else:
                return refuse(
                    f"the VTGate double needs a shard target for this statement: keyspace {keyspace} has "
                    f"{len(serving)} shards and the double has no query planner; USE `{keyspace}:<shard>` first"
                )
        found = next((s for s in shards if s.name == shard), None)
        if found is None:
            return refuse(
                f"target: {keyspace}.{shard}.primary: no healthy tablet available for '{keyspace}/{shard}'"
            )
        if not found.serving and _WRITE.match(text):
            return refuse(
                "vttablet: rpc error: code = FailedPrecondition desc = disallowed due to rule: enforce denied "
                f"tables (shard {keyspace}/{shard} is no longer serving after a reshard)"
            )
        backend = self.backends.get((keyspace, shard))
        if backend is None:
            try:
                backend = Backend(
                    found.host,
                    found.port,
                    self.server.user,
                    self.server.password,
                    keyspace,
                    self.charset,
                    self.caps,
                )
                for setting in self.settings:
                    backend.query(setting)
            except (OSError, ConnectionError) as exc:
                return refuse(f"target: {keyspace}.{shard}.primary: vttablet: {exc}", 2013)
            self.backends[(keyspace, shard)] = backend
        return backend

    def relay(self, backend: Backend, sql: str) -> bool:
        """The shard server's answer to `sql`, packet by packet; True when it succeeded."""
        self.io.seq = 1
        try:
            backend.command(COM_QUERY, sql.encode("utf-8", errors="surrogateescape"))
            while True:
                first = backend.read()
                self.io.write(first)
                if first[0] == 0xFF:
                    return False
                if first[0] == 0x00:
                    if not mp.status_of(first) & mp.SERVER_MORE_RESULTS_EXISTS:
                        return True
                    continue
                count, _ = mp.read_lenenc(first, 0)
                for _ in range(count + 1):  # column definitions, then EOF
                    self.io.write(backend.read())
                while True:
                    packet = backend.read()
                    self.io.write(packet)
                    if packet[0] == 0xFF:
                        return False
                    if mp.is_eof(packet):
                        break
                if not mp.status_of(packet) & mp.SERVER_MORE_RESULTS_EXISTS:
                    return True
        except (OSError, ConnectionError) as exc:
            self.backends = {k: v for k, v in self.backends.items() if v is not backend}
            self.io.write(err_packet(2013, f"Lost connection to the shard server: {exc}"))
            return False

    # ------------------------------------------------------------------ answers of its own

    def show_shards(self, pattern: str | None) -> None:
        names = [
            f"{ks}/{s.name}"
            for ks, shards in sorted(self.server.topology.load().items())
            for s in shards
            if s.serving
        ]
        if pattern is not None:
            matcher = _like(pattern.replace("''", "'"))
            names = [n for n in names if matcher.match(n)]
        self.rows(["Shards"], [[n] for n in names])

    def show_tablets(self) -> None:
        rows = []
        for ks, shards in sorted(self.server.topology.load().items()):
            for s in shards:
                state = "SERVING" if s.serving else "NOT_SERVING"
                alias = f"zone1-{s.port:010d}"
                rows.append(["zone1", ks, s.name, "PRIMARY", state, alias, s.host, ""])
        names = [
            "Cell",
            "Keyspace",
            "Shard",
            "TabletType",
            "State",
            "Alias",
            "Hostname",
            "PrimaryTermStartTime",
        ]
        self.rows(names, rows)

    def rows(self, columns: list[str], rows: list[list[Any]]) -> None:
        self.io.seq = 1
        self.io.write(mp.lenenc(len(columns)))
        for name in columns:
            self.io.write(mp.text_column(name))
        self.io.write(eof_packet())
        for row in rows:
            self.io.write(mp.text_row(row))
        self.io.write(eof_packet())


class Router(socketserver.ThreadingTCPServer):
    """The MySQL listener: a thread per client session."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, topology: Topology, user: str, password: str) -> None:
        super().__init__(("127.0.0.1", port), Session)
        self.topology, self.user, self.password = topology, user, password
