"""The double's topology: keyspaces, their shards, and the MariaDB server behind each.

A JSON file mapping keyspace -> list of shards::

    {"commerce": [{"name": "-80", "host": "127.0.0.1", "port": 3311, "serving": true},
                  {"name": "80-", "host": "127.0.0.1", "port": 3312, "serving": true}]}

It stands for Vitess's topology server. The double reads it again whenever a stream
starts or a session targets a shard, so tests add keyspaces and reshard while it runs,
and the double keeps no state of its own (it can be killed and restarted at any time).
A keyspace's database on each of its shard servers is named like the keyspace. Shard
names are key ranges: `-80`, `80-`, `80-c0`, `c0-`, or `0` / `-` for an unsharded one."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

_SAVING = threading.Lock()


@dataclass(frozen=True)
class Shard:
    name: str
    host: str
    port: int
    serving: bool = True


class Topology:
    """The topology file; every read sees the latest saved version (atomic replace)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, list[Shard]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {ks: [Shard(**s) for s in shards] for ks, shards in data.items()}

    def save(self, keyspaces: dict[str, list[Shard]]) -> None:
        with _SAVING:
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            text = json.dumps({ks: [asdict(s) for s in shards] for ks, shards in keyspaces.items()}, indent=1)
            tmp.write_text(text)
            os.replace(tmp, self.path)

    def keyspaces(self) -> list[str]:
        return sorted(self.load())

    def shards(self, keyspace: str, serving_only: bool = True) -> list[Shard]:
        """A keyspace's shards in topology order (the serving ones, unless asked)."""
        return [s for s in self.load().get(keyspace, []) if s.serving or not serving_only]

    def shard(self, keyspace: str, name: str) -> Shard | None:
        """A shard by name, serving or not (an old VGTID may still name a split shard)."""
        return next((s for s in self.load().get(keyspace, []) if s.name == name), None)
