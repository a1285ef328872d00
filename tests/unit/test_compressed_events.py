"""MariaDB's compressed binlog events made plain (log_bin_compress): the layout of each
kind, the checksum, the size the event has in the file, and refusals."""

from __future__ import annotations

import struct
import zlib

import pytest

from cdc_core.connectors.mysql.compressed_events import BinlogPacket, CompressedEventError, inflate


def record(text: bytes, lenlen: int = 2) -> bytes:
    return bytes([0x80 | lenlen]) + len(text).to_bytes(lenlen, "big") + zlib.compress(text)


def packet(kind: int, body: bytes, checksum: bool = True, next_pos: int = 5000) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    header = struct.pack("<IBIIIH", 1700000000, kind, 1, size, next_pos, 0)
    trailer = struct.pack("<I", zlib.crc32(header + body)) if checksum else b""
    return b"\x00" + header + body + trailer


def parts(data: bytes) -> tuple[int, int, int, bytes]:
    _ts, kind, _server, size, next_pos, _flags = struct.unpack_from("<IBIIIH", data, 1)
    return kind, size, next_pos, data[20:]


@pytest.mark.parametrize("checksum", [True, False])
def test_a_compressed_update_becomes_the_plain_update_with_its_size_in_the_file_kept(checksum):
    rows = b"\x00" * 3 + b"row-images" * 50
    prefix = (
        b"\x2a\x00\x00\x00\x00\x00" + b"\x01\x00" + b"\x03" + b"\x07" + b"\x07"
    )  # table id, flags, width, 2 bitmaps
    data = packet(0xA7, prefix + record(rows), checksum)
    plain, in_file = inflate(data)
    kind, size, next_pos, body = parts(plain)
    assert (kind, next_pos, in_file) == (0x18, 5000, len(data) - 1)
    assert size == len(plain) - 1
    if checksum:
        assert body == prefix + rows + struct.pack("<I", zlib.crc32(plain[1:-4]))
    else:
        assert body == prefix + rows


def test_v2_rows_skip_their_extra_data_and_wide_tables_their_length_coded_width():
    width = 300  # a length-coded count (0xFC + 2 bytes), bitmaps of 38 bytes
    prefix = (
        b"\x01" * 6 + b"\x00\x00" + b"\x04\x00\xaa\xbb" + b"\xfc" + width.to_bytes(2, "little") + b"\xff" * 38
    )
    plain, _ = inflate(packet(0xA9, prefix + record(b"rows" * 100, lenlen=3)))
    kind, _size, _pos, body = parts(plain)
    assert kind == 0x1E and body[:-4] == prefix + b"rows" * 100


def test_a_compressed_query_keeps_its_status_and_schema_and_inflates_its_statement():
    statement = b"ALTER TABLE t ADD COLUMN w INT COMMENT '" + b"c" * 300 + b"'"
    status = b"\x00\x01\x02"
    post = struct.pack("<IIBHH", 7, 0, 4, 0, len(status))
    plain, _ = inflate(packet(0xA5, post + status + b"shop\x00" + record(statement)))
    kind, _size, _pos, body = parts(plain)
    assert kind == 0x02 and body[:-4] == post + status + b"shop\x00" + statement


def test_other_packets_pass_unchanged():
    write = packet(0x17, b"\x01" * 40)
    assert inflate(write) == (write, None)
    ok_reply = b"\x00\x00\x00\x02\x00\x00\x00" + b"\xa6" * 20  # not a whole binlog event
    assert inflate(ok_reply) == (ok_reply, None)
    assert BinlogPacket(write, "utf8").original_size is None


@pytest.mark.parametrize(
    "tail, says",
    [
        (b"\x90\x00\x05" + zlib.compress(b"12345"), "unknown compression header 0x90"),
        (b"\x82\x00\x09" + zlib.compress(b"12345"), "inflated to 5 bytes where it says 9"),
        (b"\x82\x00\x05" + b"not zlib", "does not inflate"),
    ],
)
def test_an_event_that_cannot_be_inflated_stops_with_what_is_wrong(tail, says):
    prefix = b"\x01" * 8 + b"\x01" + b"\x01"
    with pytest.raises(CompressedEventError, match=says):
        inflate(packet(0xA6, prefix + tail))
