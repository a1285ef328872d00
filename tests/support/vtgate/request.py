"""A VStream request's VGTID resolved against the topology, as VTGate's
`vstreamManager.resolveParams` and `keyspaceHasBeenResharded` do, with their errors.

* One entry with an empty keyspace: its gtid must be `current`; it stands for every
  keyspace. One entry whose keyspace starts with `/`: an unanchored regular expression
  over keyspace names, each match keeping the gtid.
* An entry without a shard (gtid `current` or `""`) stands for every serving shard of
  its keyspace, in topology order.
* Entries with a shard pass through as they are, `table_p_ks` included; a shard the
  keyspace does not have (serving or not: an old VGTID may name a split shard) is
  FAILED_PRECONDITION when its stream starts."""

from __future__ import annotations

import re
from typing import Any

import grpc
from google.protobuf import text_format

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate.errors import VStreamError
from tests.support.vtgate.topology import Topology


def resolve_vgtid(topology: Topology, vgtid: Any) -> list[Any]:
    """The request's ShardGtids with every keyspace and shard spelled out (new messages)."""
    if not vgtid.shard_gtids:
        raise VStreamError(
            grpc.StatusCode.INVALID_ARGUMENT, "vgtid must have at least one value with a starting position"
        )
    entries = list(vgtid.shard_gtids)
    if len(entries) == 1 and (entries[0].keyspace == "" or entries[0].keyspace.startswith("/")):
        only = entries[0]
        keyspaces = topology.keyspaces()
        if only.keyspace == "":
            if only.gtid != "current":
                raise VStreamError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"for an empty keyspace, the Gtid value must be 'current': {_go(vgtid)}",
                )
            entries = [bd.ShardGtid(keyspace=ks, gtid="current") for ks in keyspaces]
        else:
            try:
                pattern = re.compile(only.keyspace.strip("/"))
            except re.error as exc:
                raise VStreamError(grpc.StatusCode.UNKNOWN, f"error parsing regexp: {exc}") from None
            entries = [bd.ShardGtid(keyspace=ks, gtid=only.gtid) for ks in keyspaces if pattern.search(ks)]
    resolved = []
    for entry in entries:
        if entry.shard:
            copied = bd.ShardGtid()
            copied.CopyFrom(entry)
            resolved.append(copied)
            continue
        if entry.gtid not in ("current", ""):
            raise VStreamError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"if shards are unspecified, the Gtid value must be 'current' or empty; got: {_go(vgtid)}",
            )
        if entry.keyspace not in topology.load():
            raise VStreamError(
                grpc.StatusCode.UNKNOWN,
                f"keyspace {entry.keyspace} fetch error: node doesn't exist: keyspaces/{entry.keyspace}/SrvKeyspace",
            )
        resolved += [
            bd.ShardGtid(keyspace=entry.keyspace, shard=s.name, gtid=entry.gtid)
            for s in topology.shards(entry.keyspace)
        ]
    return resolved


def check_shards(topology: Topology, keyspace: str, streams: list[Any]) -> None:
    """`keyspaceHasBeenResharded`'s checks, run when a stream of `keyspace` starts."""
    known = topology.load().get(keyspace)
    if not known:
        raise VStreamError(
            grpc.StatusCode.UNKNOWN,
            f"failed to determine if keyspace {keyspace} has been resharded: "
            f"node doesn't exist: keyspaces/{keyspace}/shards",
        )
    names = {s.name for s in known}
    for entry in streams:
        if entry.keyspace == keyspace and entry.shard not in names:
            raise VStreamError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"failed to determine if keyspace {keyspace} has been resharded: "
                f"shard provided in VGTID, {entry.shard}, not found in the {keyspace} keyspace",
            )


def _go(message: Any) -> str:
    """A message the way Go's `%v` prints it, near enough for an error text."""
    return text_format.MessageToString(message, as_one_line=True)
