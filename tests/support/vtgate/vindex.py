"""Which shard holds a row: the keyspace id of its first primary-key column's value.

The double's vindex is Vitess's `binary_md5` applied to the value's text (its decimal
digits, or the string itself): a 16-byte keyspace id, placed in the shard whose key range
`[start, end)` contains it. Test writers route rows with it, as VTGate would."""

from __future__ import annotations

import hashlib
from typing import Any


def keyspace_id(value: Any) -> bytes:
    text = value if isinstance(value, bytes) else str(value).encode()
    return hashlib.md5(text).digest()


def in_range(kid: bytes, shard: str) -> bool:
    if shard in ("0", "-", ""):
        return True
    left, _, right = shard.partition("-")
    start = bytes.fromhex(left)
    end = bytes.fromhex(right) if right else None
    return kid >= start and (end is None or kid < end)


def shard_for(value: Any, shards: list[str]) -> str:
    kid = keyspace_id(value)
    for name in shards:
        if in_range(kid, name):
            return name
    raise ValueError(f"no shard of {shards} holds keyspace id {kid.hex()}")
