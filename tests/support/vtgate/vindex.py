"""Which shard holds a row, as the double's vschema would say.

Every table's primary vindex is Vitess's `binary_md5` applied to the text form of the
row's first primary-key column: the keyspace id is the 16-byte MD5 of the value's bytes
(an integer's decimal digits, a string's UTF-8 bytes, a binary value as it is). The row
lives in the shard whose key range `[start, end)` contains that id; a shard name's bounds
are hex prefixes (`80-c0`: from 0x80 up to, not including, 0xc0), an empty bound is
unbounded, and `0` or `-` is the whole range (an unsharded keyspace).

Test writers route rows with it (`cluster.py`) and reshards split rows by it, as VTGate
and VReplication would."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any


def keyspace_id(value: Any) -> bytes:
    """The keyspace id of a primary-key value."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value)
    else:
        text = str(value).encode()
    return hashlib.md5(text).digest()


def key_range(shard: str) -> tuple[bytes, bytes | None]:
    """(start, end) of a shard name; end None is unbounded."""
    if shard in ("0", "-", ""):
        return b"", None
    left, sep, right = shard.partition("-")
    if not sep:
        raise ValueError(f"shard name {shard!r} is not a key range (like -80, 80-c0, c0-, or 0)")
    return bytes.fromhex(left), (bytes.fromhex(right) if right else None)


def contains(shard: str, kid: bytes) -> bool:
    start, end = key_range(shard)
    return kid >= start and (end is None or kid < end)


def shard_for(kid: Any, shard_names: Sequence[str]) -> str:
    """The shard of `shard_names` whose key range contains keyspace id `kid`. Anything
    but a 16-byte keyspace id is taken for a primary-key value and hashed first, so a
    caller holding the row's value may pass it as it is (a 16-byte binary key value must
    go through `keyspace_id` itself)."""
    if not (isinstance(kid, bytes) and len(kid) == 16):
        kid = keyspace_id(kid)
    for name in shard_names:
        if contains(name, kid):
            return name
    raise ValueError(f"no shard of {list(shard_names)} holds keyspace id {kid.hex()}")


def overlaps(a: str, b: str) -> bool:
    """Whether two shards' key ranges intersect (a reshard's sources and targets do)."""
    a_start, a_end = key_range(a)
    b_start, b_end = key_range(b)
    return (a_end is None or b_start < a_end) and (b_end is None or a_start < b_end)
