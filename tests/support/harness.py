"""The snapshot correctness harness: three tables, a random writer, an in-order consumer.

Tables: an integer key, a composite key, and a VARCHAR key under a case-insensitive
collation with mixed-case values. The writer inserts, updates (each update increments a
`version` column), deletes and changes primary keys while a snapshot runs, and remembers
every key it touched. The checks, on the stream an in-order consumer sees (exact repeats
after a `kill -9`, same order key, count once):

1. replaying it gives exactly the source tables;
2. no time travel: per key, versions and order keys never go backwards, and no snapshot
   read brings back a deleted row;
3. every row that existed throughout and was never touched is released exactly once.

Used by the incremental-snapshot tests and, later, the Delta merge tests.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.streamer import Connector, admin, payloads


@dataclass(frozen=True)
class HarnessTable:
    name: str
    ddl: str
    key: tuple[str, ...]

    def new_key(self, n: int, rng: random.Random) -> tuple[Any, ...]:
        if self.name == "int_pk":
            return (n,)
        if self.name == "composite_pk":
            return (rng.choice(["eu", "US", "Ap", "sa"]), n)
        word = "".join(c.upper() if rng.random() < 0.5 else c for c in "key")
        return (f"{word}-{n:06d}",)


TABLES = (
    HarnessTable(
        "int_pk",
        "CREATE TABLE int_pk (id INT PRIMARY KEY, version INT NOT NULL, payload VARCHAR(40))",
        ("id",),
    ),
    HarnessTable(
        "composite_pk",
        "CREATE TABLE composite_pk (region VARCHAR(8) NOT NULL, seq INT NOT NULL, version INT NOT NULL, "
        "payload VARCHAR(40), PRIMARY KEY (region, seq))",
        ("region", "seq"),
    ),
    HarnessTable(
        "text_pk",
        "CREATE TABLE text_pk (code VARCHAR(32) COLLATE utf8mb4_general_ci PRIMARY KEY, version INT NOT NULL, "
        "payload VARCHAR(40))",
        ("code",),
    ),
)


def _where(table: HarnessTable) -> str:
    return " AND ".join(f"`{k}` = %s" for k in table.key)


def create_tables(params: dict[str, Any], database: str, rows: int, seed: int = 1) -> dict[str, set]:
    """The three tables with `rows` rows each; returns the initial keys per table."""
    rng = random.Random(seed)
    db = admin(params, database)
    initial: dict[str, set] = {}
    with db.cursor() as cur:
        for table in TABLES:
            cur.execute(table.ddl)
            keys = [table.new_key(n, rng) for n in range(1, rows + 1)]
            marks = ", ".join(["%s"] * (len(table.key) + 2))
            cur.executemany(
                f"INSERT INTO {table.name} VALUES ({marks})", [(*k, 0, f"seed {k}") for k in keys]
            )
            initial[table.name] = set(keys)
    db.close()
    return initial


@dataclass(eq=False)
class RandomWriter(threading.Thread):
    """Inserts, updates (version + 1), deletes and primary-key changes, at random."""

    params: dict[str, Any]
    database: str
    initial: dict[str, set]
    seed: int = 7
    pause: float = 0.003
    touched: dict[str, set] = field(default_factory=dict)
    changes: int = 0

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self.stop_flag = threading.Event()
        self.live = {name: sorted(keys, key=repr) for name, keys in self.initial.items()}
        self.touched = {name: set() for name in self.initial}
        self.next_n = 10_000_000

    def run(self) -> None:
        rng = random.Random(self.seed)
        db = admin(self.params, self.database)
        with db.cursor() as cur:
            while not self.stop_flag.is_set():
                table = rng.choice(TABLES)
                live = self.live[table.name]
                roll = rng.random()
                if not live or roll < 0.15:
                    self.next_n += 1
                    key = table.new_key(self.next_n, rng)
                    marks = ", ".join(["%s"] * (len(table.key) + 2))
                    cur.execute(f"INSERT INTO {table.name} VALUES ({marks})", (*key, 0, "inserted"))
                    live.append(key)
                    self.touched[table.name].add(key)
                else:
                    index = rng.randrange(len(live))
                    key = live[index]
                    self.touched[table.name].add(key)
                    if roll < 0.75:
                        cur.execute(
                            f"UPDATE {table.name} SET version = version + 1, payload = %s WHERE {_where(table)}",
                            (f"u{self.changes}", *key),
                        )
                    elif roll < 0.9:
                        cur.execute(f"DELETE FROM {table.name} WHERE {_where(table)}", key)
                        live.pop(index)
                    else:
                        self.next_n += 1
                        new_key = table.new_key(self.next_n, rng)
                        sets = ", ".join(f"`{k}` = %s" for k in table.key)
                        cur.execute(
                            f"UPDATE {table.name} SET {sets}, version = version + 1 WHERE {_where(table)}",
                            (*new_key, *key),
                        )
                        live[index] = new_key
                        self.touched[table.name].add(new_key)
                self.changes += 1
                time.sleep(self.pause)
        db.close()

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(30)


def distinct(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a consumer that drops repeats (same transaction and total_order) applies."""
    seen: set = set()
    out = []
    for e in events:
        t = e["transaction"]
        identity = (t["id"], t["total_order"])
        if identity not in seen:
            seen.add(identity)
            out.append(e)
    return out


def assert_no_time_travel(
    events: list[dict[str, Any]],
    key_of: Any,
    version: str,
    label: str = "",
    order_keys: bool = False,
) -> None:
    """Per key, in the order a consumer applies them (repeats dropped): the version column
    never goes back (a create starts over), no snapshot read follows a delete, and, with
    `order_keys`, each event's (epoch, rank, total_order) is higher than the last."""
    versions: dict[Any, int] = {}
    order: dict[Any, tuple] = {}
    deleted: set = set()
    for e in distinct(events):
        key = key_of(e["after"] or e["before"])
        if order_keys:
            t = e["transaction"]
            order_key = (t["transaction_epoch"], t["transaction_rank"], t["total_order"])
            assert order_key > order.get(key, (-1, -1, -1)), f"{label} {key}: order key went back"
            order[key] = order_key
        if e["op"] == "d":
            deleted.add(key)
            versions.pop(key, None)
            continue
        if e["op"] == "r":
            assert key not in deleted, f"{label} {key}: a snapshot read brought back a deleted row"
        if e["op"] == "c":
            deleted.discard(key)
            versions.pop(key, None)
        v = e["after"][version]
        assert v >= versions.get(key, -1), f"{label} {key}: version went back from {versions[key]} to {v}"
        versions[key] = v


def _key(table: HarnessTable, row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in table.key)


def check(
    connector: Connector, params: dict[str, Any], database: str, initial: dict[str, set], writer: RandomWriter
) -> dict[str, int]:
    """The three promises, for every table; returns the number of snapshot reads per table."""
    db = admin(params, database)
    reads_per_table = {}
    for table in TABLES:
        events = distinct(payloads(connector, f"{connector.prefix}.{database}.{table.name}"))
        # 1. replay equals the source
        state: dict[tuple, tuple] = {}
        for e in events:
            if e["op"] in ("c", "u", "r"):
                state[_key(table, e["after"])] = (e["after"]["version"], e["after"]["payload"])
            elif e["op"] == "d":
                state.pop(_key(table, e["before"]), None)
        with db.cursor() as cur:
            cur.execute(f"SELECT {', '.join(table.key)}, version, payload FROM {table.name}")
            n = len(table.key)
            source = {tuple(r[:n]): (r[n], r[n + 1]) for r in cur.fetchall()}
        assert state == source, (
            f"{table.name}: replay differs from the source ({len(state)} vs {len(source)} rows)"
        )
        # 2. no time travel
        assert_no_time_travel(
            events, lambda row, t=table: _key(t, row), "version", table.name, order_keys=True
        )
        # 3. untouched rows released exactly once
        reads = Counter(_key(table, e["after"]) for e in events if e["op"] == "r")
        untouched = initial[table.name] - writer.touched[table.name]
        wrong = {k: reads[k] for k in untouched if reads[k] != 1}
        assert not wrong, (
            f"{table.name}: untouched rows not released exactly once: {dict(list(wrong.items())[:5])}"
        )
        reads_per_table[table.name] = sum(reads.values())
    db.close()
    return reads_per_table
