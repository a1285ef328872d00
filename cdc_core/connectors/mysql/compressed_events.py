"""MariaDB's compressed binlog events, inflated before python-mysql-replication sees them.

With `log_bin_compress=ON` (dynamic, so it can be switched on while a streamer runs)
MariaDB writes every query and row event longer than `log_bin_compress_min_len` as a
compressed event of its own type (0xA5-0xAB). python-mysql-replication knows none of
them and skips them as "not implemented": their rows, and the DDL among them, were lost
without a word. Each is rewritten here into the plain event it compresses, on the
stream connection's packets, so every later step reads an ordinary event.

A compressed part (MariaDB's "compressed record") is one header byte - the top bit set,
bits 4-6 the algorithm (0: zlib), bits 0-2 how many bytes of length follow - then the
uncompressed length, big-endian, then the zlib stream. In a query event the statement
text is compressed; in a row event, the rows after the column count and bitmaps.

The inflated event is longer than the one in the binlog file, and positions are taken
from the event's size (its start is the next position minus its size), so the packet
keeps the size the event has in the file (`original_size`).
"""

from __future__ import annotations

import struct
import zlib

from pymysql.connections import Connection
from pymysql.protocol import MysqlPacket

from cdc_core.errors import TidemarkError

QUERY_COMPRESSED = 0xA5
# compressed type -> (plain type, rows post-header has v2 extra data, update: two bitmaps)
_ROWS = {
    0xA6: (0x17, False, False),
    0xA7: (0x18, False, True),
    0xA8: (0x19, False, False),
    0xA9: (0x1E, True, False),
    0xAA: (0x1F, True, True),
    0xAB: (0x20, True, False),
}
_QUERY_EVENT = 0x02
_HEADER = 19  # timestamp, type, server id, event size, next position, flags
_ROWS_POST_HEADER = 8  # table id (6), flags (2)
_QUERY_POST_HEADER = 13


class CompressedEventError(TidemarkError):
    """A compressed binlog event that cannot be read: stopping keeps the position."""


def inflate(data: bytes) -> tuple[bytes, int | None]:
    """`data` (a binlog packet: the OK byte, then the event) with a compressed event made
    plain, and the event's size in the binlog file; other packets come back unchanged,
    with None."""
    if len(data) < 1 + _HEADER or data[0] != 0 or not (QUERY_COMPRESSED <= data[5] <= 0xAB):
        return data, None
    size = struct.unpack_from("<I", data, 10)[0]
    if size != len(data) - 1:
        return data, None  # not a whole binlog event (a reply on another connection)
    kind, body = data[5], data[1 + _HEADER :]
    if kind == QUERY_COMPRESSED:
        schema_length, status_length = body[8], struct.unpack_from("<H", body, 11)[0]
        start, plain = _QUERY_POST_HEADER + status_length + schema_length + 1, _QUERY_EVENT
    else:
        plain, v2, update = _ROWS[kind]
        start = _ROWS_POST_HEADER + (struct.unpack_from("<H", body, 8)[0] if v2 else 0)
        width, start = _length_coded(body, start)
        start += ((width + 7) // 8) * (2 if update else 1)
    text, trailer = _record(body, start)
    header = bytearray(data[1 : 1 + _HEADER])
    header[4] = plain
    event_body = body[:start] + text
    struct.pack_into("<I", header, 9, _HEADER + len(event_body) + len(trailer))
    if trailer:  # the CRC32 of the event as it now is
        trailer = struct.pack("<I", zlib.crc32(bytes(header) + event_body))
    return b"\x00" + bytes(header) + event_body + trailer, size


def _length_coded(body: bytes, at: int) -> tuple[int, int]:
    first = body[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(body[at + 1 : at + 1 + width], "little"), at + 1 + width


def _record(body: bytes, at: int) -> tuple[bytes, bytes]:
    """The compressed record at `at`, inflated, and what follows it (the checksum)."""
    head = body[at]
    if head & 0x80 == 0 or (head >> 4) & 0x07 != 0 or not 1 <= head & 0x07 <= 4:
        raise CompressedEventError(
            f"a compressed binlog event with an unknown compression header {head:#04x} "
            "(only zlib is known): the streamer stops at the event before it"
        )
    lenlen = head & 0x07
    length = int.from_bytes(body[at + 1 : at + 1 + lenlen], "big")
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(body[at + 1 + lenlen :])
    except zlib.error as exc:
        raise CompressedEventError(f"a compressed binlog event does not inflate: {exc}") from None
    if len(text) != length or not inflater.eof:
        raise CompressedEventError(
            f"a compressed binlog event inflated to {len(text)} bytes where it says {length}"
        )
    return text, inflater.unused_data


class BinlogPacket(MysqlPacket):
    """A packet of the binlog stream, its compressed event (if any) made plain."""

    __slots__ = ("original_size",)

    def __init__(self, data: bytes, encoding: str) -> None:
        data, self.original_size = inflate(data)
        super().__init__(data, encoding)


class BinlogConnection(Connection):
    """A pymysql connection whose packets are BinlogPackets."""

    def _read_packet(self, packet_type: type = MysqlPacket) -> MysqlPacket:
        return super()._read_packet(BinlogPacket if packet_type is MysqlPacket else packet_type)


def size_in_file(packet: object, size: int) -> int:
    """The size the event has in the binlog file: `size` unless it was inflated."""
    return getattr(packet, "original_size", None) or size
