"""BSON built by hand, byte by byte: every type MongoDB stores, the deprecated ones, what
pymongo cannot encode (a repeated name, text that is not UTF-8, a date of any year, the
old binary subtype), random documents of all of them, and malformed ones."""

from __future__ import annotations

import random
import struct
from typing import Any


def element(kind: int, name: bytes | str, payload: bytes) -> bytes:
    return bytes([kind]) + (name.encode() if isinstance(name, str) else name) + b"\0" + payload


def document(*elements: bytes) -> bytes:
    body = b"".join(elements)
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def array(*values: tuple[int, bytes]) -> bytes:
    return document(*(element(kind, str(i), payload) for i, (kind, payload) in enumerate(values)))


def string(text: bytes | str) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<i", len(data) + 1) + data + b"\0"


def int32(n: int) -> tuple[int, bytes]:
    return 0x10, struct.pack("<i", n)


def int64(n: int) -> tuple[int, bytes]:
    return 0x12, struct.pack("<q", n)


def double(x: float) -> tuple[int, bytes]:
    return 0x01, struct.pack("<d", x)


def text(value: bytes | str) -> tuple[int, bytes]:
    return 0x02, string(value)


def date(millis: int) -> tuple[int, bytes]:
    return 0x09, struct.pack("<q", millis)


def binary(subtype: int, data: bytes) -> tuple[int, bytes]:
    if subtype == 2:  # the old form: its length again inside
        return 0x05, struct.pack("<i", len(data) + 4) + b"\x02" + struct.pack("<i", len(data)) + data
    return 0x05, struct.pack("<i", len(data)) + bytes([subtype]) + data


def decimal128(low: int, high: int) -> tuple[int, bytes]:
    return 0x13, struct.pack("<QQ", low, high)


def decimal(text: str) -> tuple[int, bytes]:
    from bson import Decimal128

    return 0x13, Decimal128(text).bid


def oid(hex_text: str) -> tuple[int, bytes]:
    return 0x07, bytes.fromhex(hex_text)


def regex(pattern: bytes | str, options: bytes | str) -> tuple[int, bytes]:
    p = pattern.encode() if isinstance(pattern, str) else pattern
    o = options.encode() if isinstance(options, str) else options
    return 0x0B, p + b"\0" + o + b"\0"


def db_pointer(namespace: str, hex_text: str) -> tuple[int, bytes]:
    return 0x0C, string(namespace) + bytes.fromhex(hex_text)


def code(source: str) -> tuple[int, bytes]:
    return 0x0D, string(source)


def code_with_scope(source: str, scope: bytes) -> tuple[int, bytes]:
    body = string(source) + scope
    return 0x0F, struct.pack("<i", len(body) + 4) + body


def symbol(name: str) -> tuple[int, bytes]:
    return 0x0E, string(name)


def timestamp(seconds: int, increment: int) -> tuple[int, bytes]:
    return 0x11, struct.pack("<II", increment, seconds)


def sub(doc: bytes) -> tuple[int, bytes]:
    return 0x03, doc


def arr(items: bytes) -> tuple[int, bytes]:
    return 0x04, items


UNDEFINED, NULL, MIN_KEY, MAX_KEY = (0x06, b""), (0x0A, b""), (0xFF, b""), (0x7F, b"")
TRUE, FALSE = (0x08, b"\x01"), (0x08, b"\x00")


def doc_of(*members: tuple[str | bytes, tuple[int, bytes]]) -> bytes:
    return document(*(element(kind, name, payload) for name, (kind, payload) in members))


# ---------------------------------------------------------------------------- random

# Bytes that are not UTF-8, or are in ways the JDK and Python decode differently.
NOT_UTF8 = [
    b"\xff",
    b"\xed\xa0\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x99",
    b"\xc0\xaf",
    b"\xf8\x88\x80\x80\x80",
]
# Text both JSON writers leave as it is (letters, digits, punctuation, symbols).
PLAIN = "abcXYZ019 _-.:/é€ß漢ü$"


def random_text(rng: random.Random) -> bytes:
    pick = rng.random()
    if pick < 0.15:
        return b"".join(rng.choice([*NOT_UTF8, b"a", "é".encode()]) for _ in range(rng.randrange(1, 4)))
    if pick < 0.25:
        return "".join(rng.choice(['"', "\\", "\n", "\t", "\x01", "\x1f", "a"]) for _ in range(4)).encode()
    return "".join(rng.choice(PLAIN) for _ in range(rng.randrange(0, 8))).encode()


def random_decimal(rng: random.Random) -> tuple[int, bytes]:
    pick = rng.random()
    if pick < 0.5:
        coefficient = rng.choice(
            [0, 1, 7, 10, 12345, 10**33, 10**34 - 1, rng.getrandbits(rng.randrange(1, 113))]
        )
        exponent = rng.choice([0, -1, -2, -6, -7, -20, 1, 3, 6111, -6176, rng.randrange(-6176, 6112)])
        sign = rng.choice([0, 1]) << 63
        high = sign | (exponent + 6176) << 49 | coefficient >> 64
        return decimal128(coefficient & (2**64 - 1), high)
    if pick < 0.6:
        return decimal128(rng.getrandbits(64), rng.getrandbits(64))  # NaN, infinities, any bits
    return decimal(rng.choice(["0", "-0", "1.5", "-1E+3", "0.000001", "1E-7", "NaN", "-Infinity", "12.50"]))


def random_value(rng: random.Random, depth: int = 0) -> tuple[int, bytes]:
    pick = rng.randrange(25 if depth < 3 else 21)
    if pick == 0:
        return double(
            rng.choice([0.0, -0.0, 1.5, 1e21, 1e-7, float("nan"), float("inf"), rng.uniform(-1e9, 1e9)])
        )
    if pick == 1:
        return text(random_text(rng))
    if pick == 2:
        return int32(rng.randrange(-(2**31), 2**31))
    if pick == 3:
        return int64(rng.randrange(-(2**63), 2**63))
    if pick == 4:
        return date(
            rng.choice(
                [0, -1, 253402300799999, 253402300800000, -(2**63), 2**63 - 1, rng.randrange(-(2**45), 2**45)]
            )
        )
    if pick == 5:
        subtype = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0x8A, 0xFF])
        return binary(subtype, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20))))
    if pick == 6:
        return oid(f"{rng.getrandbits(96):024x}")
    if pick == 7:
        return rng.choice([TRUE, FALSE, NULL, UNDEFINED, MIN_KEY, MAX_KEY])
    if pick == 8:
        return random_decimal(rng)
    if pick == 9:
        return regex(random_text(rng).replace(b"\0", b""), rng.choice([b"", b"i", b"xsmi", b"ux", b"lmsi"]))
    if pick == 10:
        return db_pointer(rng.choice(["db.coll", "a.b.c"]), f"{rng.getrandbits(96):024x}")
    if pick == 11:
        return code(rng.choice(["function() { return 1 }", "x", ""]))
    if pick == 12:
        return symbol(rng.choice(["sym", "", "é"]))
    if pick == 13:
        return timestamp(rng.randrange(2**32), rng.randrange(2**32))
    if pick in (14, 15, 16, 17, 18, 19, 20):
        return rng.choice([int32(rng.randrange(100)), text(b"plain"), double(2.5)])
    if pick == 21:
        return code_with_scope("return x", random_document(rng, depth + 1))
    if pick == 22:
        return arr(array(*(random_value(rng, depth + 1) for _ in range(rng.randrange(4)))))
    return sub(random_document(rng, depth + 1))


def random_name(rng: random.Random, taken: list[bytes]) -> bytes:
    pick = rng.random()
    if taken and pick < 0.1:
        return rng.choice(taken)  # a repeated name
    if pick < 0.15:
        return rng.choice(NOT_UTF8) + b"k"
    if pick < 0.2:
        return rng.choice([b"$ref", b"$id", b"$db", b"", b'q"uote'])
    return f"f{rng.randrange(30)}".encode()


def random_document(rng: random.Random, depth: int = 0, id_value: Any = None) -> bytes:
    members = []
    taken: list[bytes] = []
    if id_value is not None:
        members.append(
            element(id_value[0], b"_id", id_value[1])
        )  # (never repeated: a null would take its place)
    for _ in range(rng.randrange(6 if depth < 2 else 3)):
        name = random_name(rng, taken)
        taken.append(name)
        kind, payload = random_value(rng, depth)
        members.append(element(kind, name, payload))
    return document(*members)


def malformed_variants(doc: bytes) -> list[bytes]:
    """The document broken in ways the Java driver refuses: an unknown type byte, a
    boolean byte of 2, a length one short or one long, a string without its zero."""
    out = []
    body = doc[4:-1]
    out.append(document(body + element(0x14, "bad", b"")))
    out.append(document(body + element(0x08, "flag", b"\x02")))
    out.append(document(body + element(0x02, "s", struct.pack("<i", 2) + b"ab")))
    out.append(document(body + element(0x03, "d", struct.pack("<i", 4) + b"\0")))
    out.append(
        document(body + element(0x05, "b", struct.pack("<i", 8) + b"\x02" + struct.pack("<i", 9) + b"abcd"))
    )
    out.append(struct.pack("<i", len(doc) - 1) + doc[4:])
    return out


def change_event(
    i: int,
    kind: str,
    full: bytes | None,
    key: tuple[int, bytes],
    *,
    collection: str = "orders",
    before: bytes | None = None,
    updated: bytes | None = None,
    transaction: tuple[bytes, int] | None = None,
) -> bytes:
    """A change event as a server sends it, its documents given as BSON bytes: event `i`
    at cluster time (1800000000 + i // 3, i % 3 + 1)."""
    members: list[tuple[str | bytes, tuple[int, bytes]]] = [
        ("_id", sub(doc_of(("_data", text(f"82{i:030X}"))))),
        ("operationType", text(kind)),
        ("clusterTime", timestamp(1_800_000_000 + i // 3, i % 3 + 1)),
        ("wallTime", date(1_795_000_000_000 + i)),
        ("ns", sub(doc_of(("db", text("shop")), ("coll", text(collection))))),
        ("documentKey", sub(doc_of(("_id", key)))),
    ]
    if transaction is not None:
        members += [
            ("lsid", sub(doc_of(("id", binary(4, transaction[0]))))),
            ("txnNumber", int64(transaction[1])),
        ]
    if full is not None:
        members.append(("fullDocument", sub(full)))
    if before is not None:
        members.append(("fullDocumentBeforeChange", sub(before)))
    if updated is not None:
        members.append(
            (
                "updateDescription",
                sub(doc_of(("updatedFields", sub(updated)), ("removedFields", arr(document())))),
            ),
        )
    return doc_of(*members)
