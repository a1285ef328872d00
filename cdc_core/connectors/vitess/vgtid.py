"""The VGTID: a keyspace's position in VStream, one GTID set per shard.

It is the connector's offset, the `source.vgtid` of every event and a transaction's id,
so its text form is Debezium's: a JSON array of `{"keyspace", "shard", "gtid",
"table_p_ks"}` in that key order. `table_p_ks` holds the copy phase's progress (the last
primary key copied per table) as the protobuf JSON form of Vitess's `TableLastPK`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from cdc_core.errors import TidemarkError


@dataclass(frozen=True)
class ShardGtid:
    keyspace: str
    shard: str
    gtid: str
    table_p_ks: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Vgtid:
    shards: tuple[ShardGtid, ...]

    # ------------------------------------------------------------------ reading

    def shard(self, name: str) -> ShardGtid | None:
        return next((s for s in self.shards if s.shard == name), None)

    @property
    def shard_names(self) -> tuple[str, ...]:
        return tuple(s.shard for s in self.shards)

    def positions(self) -> dict[str, str]:
        """Each shard's GTID set, by shard name."""
        return {s.shard: s.gtid for s in self.shards}

    def copying(self) -> bool:
        """Whether VStream would (still) copy tables from here."""
        return any(s.gtid == "" or s.table_p_ks for s in self.shards)

    # ------------------------------------------------------------------ changing

    def with_shard(self, shard: ShardGtid) -> Vgtid:
        """This VGTID with `shard`'s entry replaced (or added at the end)."""
        if self.shard(shard.shard) is None:
            return Vgtid((*self.shards, shard))
        return Vgtid(tuple(shard if s.shard == shard.shard else s for s in self.shards))

    def only(self, shard: str) -> Vgtid:
        entry = self.shard(shard)
        return Vgtid(() if entry is None else (entry,))

    # ------------------------------------------------------------------ text and proto

    def to_json(self) -> str:
        return orjson.dumps(
            [
                {"keyspace": s.keyspace, "shard": s.shard, "gtid": s.gtid, "table_p_ks": list(s.table_p_ks)}
                for s in self.shards
            ]
        ).decode()

    @classmethod
    def from_json(cls, text: str) -> Vgtid:
        try:
            items = orjson.loads(text)
            return cls(
                tuple(
                    ShardGtid(
                        str(i["keyspace"]),
                        str(i.get("shard") or ""),
                        str(i.get("gtid") or ""),
                        tuple(i.get("table_p_ks") or ()),
                    )
                    for i in items
                )
            )
        except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
            raise TidemarkError(
                f"not a VGTID: {text[:200]!r}; expected a JSON array of "
                '{"keyspace": ..., "shard": ..., "gtid": ...} objects'
            ) from None

    def to_proto(self, binlogdata: Any) -> Any:
        from google.protobuf import json_format

        return binlogdata.VGtid(
            shard_gtids=[
                binlogdata.ShardGtid(
                    keyspace=s.keyspace,
                    shard=s.shard,
                    gtid=s.gtid,
                    table_p_ks=[json_format.ParseDict(t, binlogdata.TableLastPK()) for t in s.table_p_ks],
                )
                for s in self.shards
            ]
        )

    @classmethod
    def from_proto(cls, message: Any) -> Vgtid:
        from google.protobuf import json_format

        return cls(
            tuple(
                ShardGtid(
                    s.keyspace,
                    s.shard,
                    s.gtid,
                    tuple(
                        json_format.MessageToDict(t, preserving_proto_field_name=True) for t in s.table_p_ks
                    ),
                )
                for s in message.shard_gtids
            )
        )


def for_keyspace(keyspace: str, shards: Iterable[str], gtid: str) -> Vgtid:
    """A starting VGTID: every listed shard at `gtid` (`current`, `""` to copy first, or
    a position); no shards listed means every shard of the keyspace (VTGate resolves it)."""
    names = tuple(shards) or ("",)
    return Vgtid(tuple(ShardGtid(keyspace, name, gtid) for name in names))


def moved(vgtid: Vgtid, shard: str, gtid: str, table_p_ks: tuple[dict[str, Any], ...] | None = None) -> Vgtid:
    """`vgtid` with one shard moved to `gtid` (and its copy progress, when given)."""
    entry = vgtid.shard(shard)
    if entry is None:
        raise TidemarkError(f"shard {shard!r} is not in the VGTID {vgtid.to_json()}")
    changed = replace(entry, gtid=gtid, table_p_ks=entry.table_p_ks if table_p_ks is None else table_p_ks)
    return vgtid.with_shard(changed)
