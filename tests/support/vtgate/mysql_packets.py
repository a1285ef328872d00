"""The MySQL client/server protocol pieces the double's router needs: packet framing
with sequence ids, OK/ERR/EOF and result-set packets, `mysql_native_password`, and a
minimal client for the shard servers whose responses the router relays unchanged.

Both sides speak the protocol without CLIENT_DEPRECATE_EOF, SSL, compression or
multi-statements, so a shard server's answer (column definitions, EOF, rows, EOF) is
valid for the router's client as it is, once its packets are re-sequenced."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import struct
from typing import Any

MAX_PAYLOAD = 0xFFFFFF
LONG_PASSWORD, FOUND_ROWS, LONG_FLAG, CONNECT_WITH_DB = 1, 2, 4, 8
PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION = 512, 8192, 32768
MULTI_RESULTS, PS_MULTI_RESULTS, PLUGIN_AUTH, CONNECT_ATTRS, PLUGIN_AUTH_LENENC = (
    1 << 17,
    1 << 18,
    1 << 19,
    1 << 20,
    1 << 21,
)
# What the router offers clients and asks of shard servers: no DEPRECATE_EOF, SSL,
# COMPRESS or MULTI_STATEMENTS, so the two ends frame results alike.
CAPABILITIES = (
    LONG_PASSWORD | FOUND_ROWS | LONG_FLAG | CONNECT_WITH_DB | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION
    | MULTI_RESULTS | PS_MULTI_RESULTS | PLUGIN_AUTH | CONNECT_ATTRS | PLUGIN_AUTH_LENENC
)  # fmt: skip
SERVER_STATUS_AUTOCOMMIT, SERVER_MORE_RESULTS_EXISTS = 0x0002, 0x0008
NATIVE_PASSWORD = b"mysql_native_password"


class PacketIO:
    """Logical packets over a socket: payloads of any size, sequence ids tracked."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.seq = 0

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
            if length < MAX_PAYLOAD:
                return payload

    def write(self, payload: bytes) -> None:
        while True:
            part, payload = payload[:MAX_PAYLOAD], payload[MAX_PAYLOAD:]
            self.sock.sendall(struct.pack("<I", len(part))[:3] + bytes([self.seq]) + part)
            self.seq = (self.seq + 1) % 256
            if len(part) < MAX_PAYLOAD:
                return

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def read_lenenc(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 251:
        return first, at + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[at + 1 : at + 1 + size], "little"), at + 1 + size


def ok_packet(status: int = SERVER_STATUS_AUTOCOMMIT) -> bytes:
    return b"\x00\x00\x00" + struct.pack("<HH", status, 0)


def err_packet(code: int, message: str, state: str = "HY000") -> bytes:
    return b"\xff" + struct.pack("<H", code) + b"#" + state.encode()[:5] + message.encode()


def eof_packet(status: int = SERVER_STATUS_AUTOCOMMIT) -> bytes:
    return b"\xfe" + struct.pack("<HH", 0, status)


def is_eof(packet: bytes) -> bool:
    return packet[:1] == b"\xfe" and len(packet) < 9


def status_of(packet: bytes) -> int:
    """The server status flags of an OK or EOF packet."""
    if packet[0] == 0xFE:
        return struct.unpack("<H", packet[3:5])[0]
    _, at = read_lenenc(packet, 1)
    _, at = read_lenenc(packet, at)
    return struct.unpack("<H", packet[at : at + 2])[0]


def text_column(name: str, table: str = "") -> bytes:
    """A VARCHAR column definition (utf8mb4) for results the router makes itself."""

    def s(v: str) -> bytes:
        return lenenc(len(v.encode())) + v.encode()

    return (
        s("def") + s("") + s(table) + s(table) + s(name) + s(name)
        + b"\x0c" + struct.pack("<HIBHB", 45, 1024, 253, 0, 0) + b"\x00\x00"
    )  # fmt: skip


def text_row(values: list[str | None]) -> bytes:
    out = b""
    for value in values:
        out += b"\xfb" if value is None else lenenc(len(value.encode())) + value.encode()
    return out


def scramble(password: str, salt: bytes) -> bytes:
    """`mysql_native_password`'s answer to a challenge."""
    if not password:
        return b""
    one = hashlib.sha1(password.encode()).digest()
    two = hashlib.sha1(one).digest()
    three = hashlib.sha1(salt + two).digest()
    return bytes(a ^ b for a, b in zip(one, three, strict=True))


def new_salt() -> bytes:
    return bytes(b % 94 + 33 for b in os.urandom(20))  # printable, no NUL


class Backend:
    """A connection to a shard server whose raw responses can be relayed."""

    def __init__(
        self, host: str, port: int, user: str, password: str, database: str, charset: int, caps: int
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.io = PacketIO(self.sock)
        greeting = self.io.read()
        if greeting is None:
            raise ConnectionError(f"{host}:{port} closed the connection")
        if greeting[0] == 0xFF:
            raise ConnectionError(greeting[9:].decode(errors="replace"))
        salt = _greeting_salt(greeting)
        flags = (caps & CAPABILITIES) | CONNECT_WITH_DB | PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH
        flags &= ~(CONNECT_ATTRS | PLUGIN_AUTH_LENENC)
        token = scramble(password, salt)
        self.io.write(
            struct.pack("<IIB", flags, MAX_PAYLOAD, charset) + b"\x00" * 23 + user.encode() + b"\x00"
            + bytes([len(token)]) + token + database.encode() + b"\x00" + NATIVE_PASSWORD + b"\x00"
        )  # fmt: skip
        answer = self.io.read()
        if answer is not None and answer[:1] == b"\xfe":  # auth switch: a new challenge
            salt = answer[1:].split(b"\x00", 1)[1].rstrip(b"\x00")
            self.io.write(scramble(password, salt))
            answer = self.io.read()
        if answer is None or answer[0] != 0x00:
            message = answer[9:].decode(errors="replace") if answer else "connection closed"
            raise ConnectionError(message)

    def command(self, command: int, body: bytes) -> None:
        self.io.seq = 0
        self.io.write(bytes([command]) + body)

    def read(self) -> bytes:
        packet = self.io.read()
        if packet is None:
            raise ConnectionError("the shard server closed the connection")
        return packet

    def query(self, sql: str) -> bytes:
        """Run a statement that returns no rows; its OK or ERR packet."""
        self.command(3, sql.encode())
        return self.read()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.command(1, b"")  # COM_QUIT
        self.sock.close()


def _greeting_salt(greeting: bytes) -> bytes:
    at = greeting.index(b"\x00", 1) + 1 + 4  # server version, connection id
    salt = greeting[at : at + 8]
    at += 8 + 1 + 2 + 1 + 2 + 2
    auth_length = greeting[at]
    at += 1 + 10
    rest = max(13, auth_length - 8)
    salt += greeting[at : at + rest].rstrip(b"\x00")
    return salt


def parse_handshake_response(packet: bytes) -> dict[str, Any]:
    """A client's HandshakeResponse41: capabilities, charset, user, auth data, database."""
    caps, _, charset = struct.unpack("<IIB", packet[:9])
    at = 32
    end = packet.index(b"\x00", at)
    user = packet[at:end].decode()
    at = end + 1
    if caps & PLUGIN_AUTH_LENENC:
        length, at = read_lenenc(packet, at)
    elif caps & SECURE_CONNECTION:
        length, at = packet[at], at + 1
    else:
        length = packet.index(b"\x00", at) - at
    token = packet[at : at + length]
    at += length + (0 if caps & (PLUGIN_AUTH_LENENC | SECURE_CONNECTION) else 1)
    database = ""
    if caps & CONNECT_WITH_DB and at < len(packet):
        end = packet.index(b"\x00", at)
        database = packet[at:end].decode()
        at = end + 1
    plugin = ""
    if caps & PLUGIN_AUTH and at < len(packet):
        end = packet.find(b"\x00", at)
        plugin = packet[at : end if end >= 0 else len(packet)].decode()
    return {
        "caps": caps,
        "charset": charset,
        "user": user,
        "token": token,
        "database": database,
        "plugin": plugin,
    }
