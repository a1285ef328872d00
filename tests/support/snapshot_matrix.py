"""The snapshot correctness matrix: the key tables, a random writer, and the checks.

The writer (one connection, UTC session) inserts, updates (each update increments
`version`), deletes and changes primary keys at random, wraps some changes in
multi-table transactions and, when the test asks, runs a transaction of about 500 rows or
adds a column to `t_altered`. It remembers every row it touched.

The checks, after the stream has been merged into Delta:
1. every Delta table equals its source table (values rendered as the events carry them,
   then as the merge lands them);
2. no time travel: per key, in the order an in-order consumer applies them (repeats after
   a `kill -9` dropped), order keys rise, `version` never goes back and no snapshot read
   follows a delete. In lakehouse mode the reads are the release records' staged rows
   minus their excluded keys, at the release's order key, and the check follows the order
   keys (which is how the merge applies them);
3. every row that existed throughout and was never touched is released exactly once.
Keys are compared in their Delta form, the one form every path ends in.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.key_tables import TABLES, Key, KeyTable
from tests.support.streamer import Connector, admin, read_raw

ROWS = 24


def create_tables(params: dict[str, Any], database: str, rows: int = ROWS) -> dict[str, dict[int, Key]]:
    """The tables with `rows` rows each; per table, each row's `rid` and key."""
    db = admin(params, database)
    initial: dict[str, dict[int, Key]] = {}
    with db.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for table in TABLES:
            cur.execute(table.ddl())
            rows_by_rid = {n: table.key(n) for n in range(1, rows + 1)}
            _insert(cur, table, rows_by_rid, "seed")
            initial[table.name] = rows_by_rid
    db.close()
    return initial


def _insert(cur: Any, table: KeyTable, rows: dict[int, Key], payload: str) -> None:
    names = ", ".join(f"`{c}`" for c in (*table.key_columns, "rid", "version", "payload"))
    marks = ", ".join(["%s"] * (len(table.key_columns) + 3))
    cur.executemany(
        f"INSERT INTO `{table.name}` ({names}) VALUES ({marks})",
        [(*k, rid, 0, payload) for rid, k in rows.items()],
    )


def _where(table: KeyTable) -> str:
    return " AND ".join(f"`{k}` = %s" for k in table.key_columns)


@dataclass(eq=False)
class MatrixWriter(threading.Thread):
    params: dict[str, Any]
    database: str
    initial: dict[str, dict[int, Key]]
    seed: int = 11
    pause: float = 0.03
    touched: dict[str, set[int]] = field(default_factory=dict)  # rids
    changes: int = 0

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self.stop_flag = threading.Event()
        self.live = {name: list(rows.items()) for name, rows in self.initial.items()}  # [(rid, key)]
        self.touched = {name: set() for name in self.initial}
        self.next_n = dict.fromkeys(self.initial, ROWS + 1)
        self.error: BaseException | None = None
        self.requests: queue.SimpleQueue[str] = queue.SimpleQueue()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # surfaced by `stop`
            self.error = exc

    def request(self, action: str) -> None:
        """Have the writer do `action` ("big": a transaction of about 500 rows; "alter": a
        column added to t_altered) at its next step, so a test can place it mid-snapshot."""
        self.requests.put(action)

    def _run(self) -> None:
        rng = random.Random(self.seed)
        db = admin(self.params, self.database)
        added = 0
        with db.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            while not self.stop_flag.is_set():
                try:
                    action = self.requests.get_nowait()
                except queue.Empty:
                    action = None
                if action == "big":
                    self._big_transaction(cur, rng)
                elif action == "alter":
                    added += 1
                    cur.execute(f"ALTER TABLE t_altered ADD COLUMN added_{added} VARCHAR(8) NULL")
                elif rng.random() < 0.12:
                    cur.execute("BEGIN")
                    for table in rng.sample(TABLES, rng.randint(2, 4)):
                        self._change(cur, table, rng)
                    cur.execute("COMMIT")
                else:
                    self._change(cur, rng.choice(TABLES), rng)
                time.sleep(self.pause)
        db.close()

    def _new_key(self, table: KeyTable) -> tuple[int, Key | None]:
        n = self.next_n[table.name]
        self.next_n[table.name] = n + 1
        return n, table.key(n)

    def _change(self, cur: Any, table: KeyTable, rng: random.Random) -> None:
        live = self.live[table.name]
        roll = rng.random()
        if not live or roll < 0.15:
            rid, key = self._new_key(table)
            if key is None:
                return
            _insert(cur, table, {rid: key}, "inserted")
            live.append((rid, key))
            self.touched[table.name].add(rid)
        else:
            index = rng.randrange(len(live))
            rid, key = live[index]
            self.touched[table.name].add(rid)
            if roll < 0.72:
                also, values = "", ()
                if table.name == "t_altered":  # its nullable columns come and go
                    also = ", a = %s, b = %s, c = %s"
                    values = tuple(
                        None if rng.random() < 0.6 else v
                        for v in (self.changes, "x", "2024-01-01 00:00:01.5")
                    )
                cur.execute(
                    f"UPDATE `{table.name}` SET version = version + 1, payload = %s{also} WHERE {_where(table)}",
                    (f"u{self.changes}", *values, *key),
                )
            elif roll < 0.87:
                cur.execute(f"DELETE FROM `{table.name}` WHERE {_where(table)}", key)
                live.pop(index)
            else:
                _, new_key = self._new_key(table)
                if new_key is None:
                    return
                sets = ", ".join(f"`{k}` = %s" for k in table.key_columns)
                cur.execute(
                    f"UPDATE `{table.name}` SET {sets}, version = version + 1 WHERE {_where(table)}",
                    (*new_key, *key),
                )
                live[index] = (rid, new_key)
        self.changes += 1

    def _big_transaction(self, cur: Any, rng: random.Random) -> None:
        """About 500 rows in one transaction: 300 inserts into one table, every row of two others updated."""
        inserted = rng.choice([t for t in TABLES if t.name in ("t_altered", "t_ints", "t_decimal_dates")])
        updated = rng.sample([t for t in TABLES if t is not inserted], 2)
        cur.execute("BEGIN")
        rows = {rid: k for rid, k in (self._new_key(inserted) for _ in range(300)) if k is not None}
        _insert(cur, inserted, rows, "bulk")
        self.live[inserted.name].extend(rows.items())
        self.touched[inserted.name].update(rows)
        for table in updated:
            cur.execute(f"UPDATE `{table.name}` SET version = version + 1")
            self.touched[table.name].update(rid for rid, _ in self.live[table.name])
        cur.execute("COMMIT")
        self.changes += 1

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(60)
        if self.error is not None:
            raise AssertionError(f"the writer failed: {self.error!r}") from self.error


def altered_window_open(db: Any, database: str, signals: str = "tidemark.debezium_signal") -> bool:
    """A window-open row of t_altered without its window-close row yet."""
    with db.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*) FROM {signals} o WHERE o.type = 'snapshot-window-open' AND o.data LIKE %s "
            f"AND NOT EXISTS (SELECT 1 FROM {signals} c WHERE c.id = CONCAT(SUBSTRING_INDEX(o.id, '-open', 1), '-close'))",
            (f'%"table":"{database}.t_altered"%',),
        )
        return cur.fetchone()[0] > 0


def closed_windows(db: Any, containing: str, signals: str = "tidemark.debezium_signal") -> int:
    """Window-close rows whose data holds `containing` (a signal id, a staging path)."""
    with db.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*) FROM {signals} WHERE type = 'snapshot-window-close' AND data LIKE %s",
            (f"%{containing}%",),
        )
        return cur.fetchone()[0]


# ----------------------------------------------------------------------------- checks


def _plain(v: Any) -> Any:
    """A value as comparable Python: Spark's bytearray as bytes, instants as naive UTC."""
    import datetime as dt

    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    return v


def _field_converters(fields: list[dict[str, Any]]) -> dict[str, Any]:
    from spark_jobs.merge import connect_types

    return {f["field"]: connect_types.delta_value(f) for f in fields}


@dataclass
class Applied:
    """One thing an in-order consumer applies to a key: a change event or a snapshot read."""

    order: tuple[int, int, int]
    identity: tuple[str, int]  # (transaction id, total_order): repeats share it
    op: str
    key: Key
    version: int | None
    rid: int | None


def events_of(connector: Connector, database: str, table: KeyTable) -> list[Applied]:
    """The table's change events in topic order, keys and versions in Delta form."""
    out = []
    for _, value, _ in read_raw(connector, f"{connector.prefix}.{database}.{table.name}"):
        if value is None:
            continue
        schema, payload = value["schema"], value["payload"]
        image = next(f for f in schema["fields"] if f["field"] in ("after", "before"))
        converters = _field_converters(image["fields"])
        row = payload["after"] or payload["before"]
        key = tuple(_plain(converters[c](row[c])) if row[c] is not None else None for c in table.key_columns)
        t = payload["transaction"]
        out.append(
            Applied(
                (t["transaction_epoch"], t["transaction_rank"], t["total_order"]),
                (t["id"], t["total_order"]),
                payload["op"],
                key,
                None if payload["op"] == "d" else payload["after"]["version"],
                row["rid"],
            )
        )
    return out


def lakehouse_reads(connector: Connector, table: KeyTable) -> list[Applied]:
    """The rows each release record of the table lets the merge apply, in Delta form."""
    import pyarrow.parquet as pq

    from spark_jobs.merge.releases import parse_release

    out = []
    for _, value, _ in read_raw(connector, f"{connector.prefix}.snapshot_releases"):
        import json

        release = parse_release(json.dumps(value))
        if not release.data_collection.endswith(f".{table.name}"):
            continue
        excluded = {tuple(_plain(v) for v in k) for k in release.excluded_values()}
        staged = pq.read_table(release.staged).to_pylist()
        for i, row in enumerate(staged):
            key = tuple(_plain(row[c]) for c in table.key_columns)
            if key in excluded:
                continue
            identity = (release.txn_id, release.order[2] * 100_000 + i)
            out.append(Applied(release.order, identity, "r", key, row["version"], row["rid"]))
    return out


def applied(events: list[dict[str, Any]], key_of: Any, version: str) -> list[Applied]:
    """Change-event payloads as what a consumer applies: the key `key_of(row)` gives, the
    row's `version` column."""
    out = []
    for e in events:
        t, row = e["transaction"], e["after"] or e["before"]
        out.append(
            Applied(
                (t["transaction_epoch"], t["transaction_rank"], t["total_order"]),
                (t["id"], t["total_order"]),
                e["op"],
                key_of(row),
                None if e["op"] == "d" else e["after"][version],
                None,
            )
        )
    return out


def distinct(applied: list[Applied]) -> list[Applied]:
    seen: set = set()
    out = []
    for a in applied:
        if a.identity not in seen:
            seen.add(a.identity)
            out.append(a)
    return out


def assert_no_time_travel(applied: list[Applied], label: str, check_order: bool = True) -> None:
    """Per key in consumer order: order keys rise (`check_order`), the version never goes
    back (a create starts over), no snapshot read follows a delete."""
    versions: dict[Key, int] = {}
    last: dict[Key, tuple] = {}
    deleted: set[Key] = set()
    for a in applied:
        if check_order:
            assert a.order > last.get(a.key, (-1, -1, -1)), f"{label} {a.key}: order key went back"
            last[a.key] = a.order
        if a.op == "d":
            deleted.add(a.key)
            versions.pop(a.key, None)
            continue
        if a.op == "r":
            assert a.key not in deleted, f"{label} {a.key}: a snapshot read brought back a deleted row"
        if a.op == "c":
            deleted.discard(a.key)
            versions.pop(a.key, None)
        assert a.version >= versions.get(a.key, -1), (
            f"{label} {a.key}: version went back from {versions[a.key]} to {a.version}"
        )
        versions[a.key] = a.version


def check_stream(
    connector: Connector,
    database: str,
    initial: dict[str, dict[int, Key]],
    writer: MatrixWriter,
    lakehouse: bool,
) -> dict[str, int]:
    """Checks 2 and 3 for every table; returns the number of snapshot reads per table."""
    reads_per_table = {}
    for table in TABLES:
        events = distinct(events_of(connector, database, table))
        assert_no_time_travel(events, table.name)
        reads = [a for a in events if a.op == "r"]  # in lakehouse mode: windows the streamer read again
        if lakehouse:
            released = distinct(lakehouse_reads(connector, table))
            merged = sorted(events + released, key=lambda a: a.order)
            assert_no_time_travel(merged, f"{table.name} (as merged)", check_order=False)
            reads += released
        counts = Counter(a.rid for a in reads)
        untouched = set(initial[table.name]) - writer.touched[table.name]
        wrong = {rid: counts[rid] for rid in untouched if counts[rid] != 1}
        assert not wrong, (
            f"{table.name}: untouched rows not released exactly once: {dict(list(wrong.items())[:5])}"
        )
        reads_per_table[table.name] = len(reads)
    return reads_per_table


def assert_delta_equals_source(spark: Any, connector: Connector, root: str, database: str) -> None:
    """Check 1: each table's live Delta rows equal the source rows, every value rendered as
    the connector's events carry it and then as the merge lands it."""
    from cdc_core.connectors.registry import connector_of
    from cdc_core.schema.model import TableId
    from spark_jobs.merge import connect_types
    from spark_jobs.merge.delta_apply import live_rows
    from spark_jobs.sql_names import columns

    config = connector.config()
    session = connector_of(config).open_session(config)
    mapper, conn = session.type_mapper(), session.conn  # type: ignore[attr-defined]
    try:
        for table in TABLES:
            schema = session.table_schema(TableId(database, table.name))
            mappings = [mapper.map_column(c) for c in schema.columns]
            lands = [connect_types.delta_value(m.schema) for m in mappings]
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{database}`.`{table.name}`")
                source = sorted(
                    (
                        tuple(
                            None if v is None or (e := m.convert(v)) is None else _plain(land(e))
                            for m, land, v in zip(mappings, lands, row, strict=True)
                        )
                        for row in cur.fetchall()
                    ),
                    key=repr,
                )
            frame = live_rows(spark, f"{root}/{database}.{table.name}").select(*columns(schema.column_names))
            delta = sorted((tuple(_plain(v) for v in r) for r in frame.collect()), key=repr)
            if delta != source:
                only_delta = [r for r in delta if r not in source][:3]
                only_source = [r for r in source if r not in delta][:3]
                raise AssertionError(
                    f"{table.name}: Delta has {len(delta)} rows, the source {len(source)}; "
                    f"only in Delta: {only_delta}; only in the source: {only_source}"
                )
    finally:
        session.close()
