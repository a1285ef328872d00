"""The double's topology: keyspaces, their shards, and the MariaDB server behind each.

Kept in a JSON file the double reads again whenever a stream starts or a session targets
a shard, so tests add keyspaces and reshard while it runs (and it keeps no state of its
own: it can be killed and restarted at any time). A keyspace's database on each of its
shard servers has the keyspace's name."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shard:
    name: str  # a key range: -80, 80-, 80-c0, or 0 for an unsharded keyspace
    host: str
    port: int
    serving: bool = True


class Topology:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, list[Shard]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {ks: [Shard(**s) for s in shards] for ks, shards in data.items()}

    def save(self, keyspaces: dict[str, list[Shard]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({ks: [asdict(s) for s in shards] for ks, shards in keyspaces.items()}, indent=1)
        )
        os.replace(tmp, self.path)

    def shards(self, keyspace: str, serving_only: bool = True) -> list[Shard]:
        return [s for s in self.load().get(keyspace, []) if s.serving or not serving_only]

    def shard(self, keyspace: str, name: str) -> Shard | None:
        return next((s for s in self.load().get(keyspace, []) if s.name == name), None)
