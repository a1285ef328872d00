"""Tidemark next to Debezium on the same binlog range: run both, compare every record.

Debezium runs as its own embedded engine in one JVM (`jvm/recorder/Recorder.java`, built
by `make jars` from the artifacts in `jvm/pom.xml`), one engine per configuration; each
Tidemark configuration runs as a `tidemark stream` process with the same topic prefix
and handling modes. Both start before the range: a row inserted into the `ready` table
again and again until every one of them has emitted it marks the range's start; a row
in the `range_end` table marks its end. Records of the workload's tables (and the
transaction records of the workload's transactions) are compared field for field after
removing only the differences Tidemark makes on purpose (`INTENDED`, each with its reason;
README "Differences from Debezium").
"""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts import services
from tests.support.streamer import Connector, read_raw, start_process, wait_for, write_connector
from tests.support.types_table import all_types_ddl, insert_all_types

READY, RANGE_END = "ready", "range_end"

# What Tidemark does on purpose differently from Debezium; everything else must be equal.
INTENDED = {
    "transaction_epoch, transaction_rank": "ordered transaction metadata on every event, from every source "
    "(Vitess-style), so any consumer and the Delta merge can order two events of one key",
    "source.version": "Tidemark's own version, not Debezium's",
    "ts_ms, ts_us, ts_ns of the envelope": "the time the event was processed, which no two runs share",
    "__debezium.context.runId header": "a new random id per run, in Debezium as in Tidemark",
    "__tidemark.order and __tidemark.ends headers": "a schema change's place among the transactions and "
    "the tables whose rows it ends, so the Delta merge ends a dropped table's rows where the source "
    "dropped it (schema changes are not compared here)",
    "BEGIN ts_ms": "the time of the transaction's own first event; Debezium's MariaDB connector stamps "
    "BEGIN with the time of the binlog event before it (the previous transaction, seconds or minutes "
    "earlier after an idle spell)",
    "zero TIMESTAMP in a nullable column": "null, as Debezium's own snapshot gives it and as for the other "
    "zero dates; Debezium's streaming gives the epoch, an instant the column does not hold",
    "YEAR 0000": "0, the value stored; Debezium gives 1900, a year no YEAR column holds",
    "BIGINT UNSIGNED default above 2^63 in long mode": "wrapped like the column's values (-1 for "
    "18446744073709551615); Debezium writes Long.MAX_VALUE, a value the column's events never carry",
    "binary default with escapes": "the bytes the column holds ('ab\\0\\0' is a, b and two zero bytes); "
    "Debezium keeps SHOW CREATE TABLE's backslash escapes as text",
}


# ----------------------------------------------------------------------------- workload

TABLES = {"t", "ck", "nopk", "df"}
# Every kind of DEFAULT the schemas carry (and the ones they cannot: expressions).
DEFAULTS_DDL = """CREATE TABLE df (
    id INT PRIMARY KEY, i INT NOT NULL DEFAULT 7, ineg BIGINT DEFAULT -5,
    iu BIGINT UNSIGNED DEFAULT 18446744073709551615, bo TINYINT(1) DEFAULT TRUE, f FLOAT DEFAULT 1.1,
    d DOUBLE DEFAULT '2.5', dec1 DECIMAL(10,2) DEFAULT 12.5, bt BIT(5) DEFAULT b'101', b1 BIT(1) DEFAULT 1,
    y YEAR DEFAULT 2024, da DATE DEFAULT '2020-02-29', daz DATE NOT NULL DEFAULT '0000-00-00',
    dt DATETIME(3) DEFAULT '2001-02-03 04:05:06.789', dtn DATETIME DEFAULT CURRENT_TIMESTAMP,
    ts TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP, tsn TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    ts2 TIMESTAMP NULL DEFAULT '2010-05-06 07:08:09', tm TIME DEFAULT '-01:02:03',
    tm2 TIME(2) DEFAULT '12:00:00.25', c CHAR(3) DEFAULT 'ab', vc VARCHAR(10) NOT NULL DEFAULT '',
    tx TEXT DEFAULT 'long text', e ENUM('a','b') DEFAULT 'b', s SET('x','y') DEFAULT 'x,y',
    vb VARBINARY(4) DEFAULT 'ab', bn BINARY(4) DEFAULT 'ab', ex INT DEFAULT (1 + 1),
    fn VARCHAR(40) DEFAULT (concat('a', 'b')), n INT NULL DEFAULT NULL
)"""


def create_workload_tables(cur: Any) -> None:
    """The workload's tables (the session's time zone UTC, as the workload's literals are)."""
    cur.execute("SET time_zone = '+00:00'")
    cur.execute(all_types_ddl("t", wide=True))
    cur.execute("CREATE TABLE ck (region VARCHAR(8), seq INT, v INT, PRIMARY KEY (region, seq))")
    cur.execute("CREATE TABLE nopk (a INT, b VARCHAR(20))")
    cur.execute(DEFAULTS_DDL)


def workload(cur: Any) -> None:
    insert_all_types(cur, "t", wide=True)  # one transaction per row
    cur.execute("UPDATE t SET ti = 1, vc = 'changed', f = 3.5 WHERE id IN (1, 3)")
    cur.execute("DELETE FROM t WHERE id = 5")
    cur.executemany("INSERT INTO ck VALUES (%s, %s, %s)", [("eu", 1, 10), ("US", 2, 20), ("ap", 3, 30)])
    cur.execute("UPDATE ck SET seq = 20 WHERE region = 'US' AND seq = 2")  # a primary-key change
    cur.execute("BEGIN")
    cur.execute("INSERT INTO ck VALUES ('sa', 4, 40)")
    cur.execute("UPDATE t SET d = d + 1 WHERE id = 2")
    cur.execute("INSERT INTO nopk VALUES (1, 'no key'), (1, 'no key')")
    cur.execute("COMMIT")
    # (the columns whose default is the current time are set, so the workload's events are
    # the same in every run: tests/integration/test_event_sample.py)
    now = "'2020-01-01 00:00:00'"
    cur.execute(f"INSERT INTO df (id, dtn, ts, tsn) VALUES (1, {now}, {now}, {now})")
    cur.execute(
        f"INSERT INTO df (id, daz, dtn, ts, tsn, vc) VALUES (2, '0000-00-00', {now}, {now}, {now}, 'set')"
    )
    cur.execute(
        "ALTER TABLE ck ADD COLUMN note VARCHAR(20) NULL DEFAULT 'n/a', ADD COLUMN k INT NOT NULL DEFAULT 3"
    )
    cur.execute("INSERT INTO ck VALUES ('eu', 5, 50, 'after the ALTER', 4)")
    cur.execute("DELETE FROM ck WHERE region = 'eu' AND seq = 1")


# ----------------------------------------------------------------------------- the two sides


def recorder_command(plan: Path) -> list[str]:
    jars = services.ROOT / ".jars"
    classpath = f"{jars / 'debezium'}/*:{jars / 'recorder'}"
    return [
        "java",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        "dev.tidemark.recorder.Recorder",
        str(plan),
    ]


@dataclass
class Pair:
    """One configuration: its Tidemark connector and its Debezium engine's settings."""

    name: str
    modes: dict[str, str]
    connector: Connector | None = None
    debezium_out: Path | None = None
    proc: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def debezium_properties(pair: Pair, database: str, work: Path, server_id: int, flavor: str) -> dict[str, str]:
    cls = "io.debezium.connector.mariadb.MariaDbConnector" if flavor == "mariadb" else (
        "io.debezium.connector.mysql.MySqlConnector"
    )  # fmt: skip
    return {
        "name": pair.name,
        "connector.class": cls,
        "topic.prefix": pair.name,
        "database.hostname": "127.0.0.1",
        "database.port": str(services.PORTS.mariadb),
        "database.user": os.environ["TIDEMARK_DB_USER"],
        "database.password": os.environ[services.CDC_PASSWORD_ENV],
        "database.server.id": str(server_id),
        "database.include.list": database,
        "database.ssl.mode": "disable",
        "snapshot.mode": "no_data",
        "include.schema.changes": "false",
        "provide.transaction.metadata": "true",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / f"{pair.name}.offsets"),
        "offset.flush.interval.ms": "1000",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(work / f"{pair.name}.history"),
        **pair.modes,
    }


def start_tidemark(pair: Pair, database: str, work: Path, server_id: int) -> None:
    folder = work / f"tidemark-{pair.name}"
    folder.mkdir()
    pair.connector = write_connector(
        folder,
        database,
        {
            "name": pair.name,
            "database.server.id": server_id,
            "include.schema.changes": False,
            "provide.transaction.metadata": True,
            **pair.modes,
        },
        prefix=pair.name,
    )
    pair.proc = start_process(pair.connector)


def tidemark_records(pair: Pair) -> list[dict[str, Any]]:
    """Every record of the pair's Tidemark log: topic, key, value and headers (decoded)."""
    assert pair.connector is not None
    out = []
    for topic in sorted(p.name for p in pair.connector.eventlog.iterdir() if p.is_dir()):
        for key, value, headers in read_raw(pair.connector, topic):
            out.append(
                {
                    "topic": topic,
                    "key": key,
                    "value": value,
                    "headers": {k: json.loads(v) for k, v in headers.items()},
                }
            )
    return out


def write_for_converter(records: list[dict[str, Any]], path: Path) -> None:
    """Tidemark's records as the recorder's check reads them: key and value as JSON text."""
    with open(path, "w") as out:
        for r in records:
            text = {k: None if r[k] is None else json.dumps(r[k]) for k in ("key", "value")}
            out.write(json.dumps({"topic": r["topic"], **text}) + "\n")


def debezium_records(pair: Pair) -> list[dict[str, Any]]:
    assert pair.debezium_out is not None
    return [json.loads(line) for line in pair.debezium_out.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- comparison


def in_range(
    records: list[dict[str, Any]], prefix: str, database: str, tables: set[str]
) -> list[dict[str, Any]]:
    """The records of the workload's tables and of the workload's transactions."""
    topics = {f"{prefix}.{database}.{t}" for t in tables}
    changes = [r for r in records if r["topic"] in topics]
    txns = {r["value"]["payload"]["transaction"]["id"] for r in changes if r["value"] is not None}
    boundaries = [
        r for r in records if r["topic"] == f"{prefix}.transaction" and r["value"]["payload"]["id"] in txns
    ]
    return changes + boundaries


def normalised(record: dict[str, Any]) -> dict[str, Any]:
    """A record with only the intended differences taken out (see INTENDED)."""
    record = json.loads(json.dumps(record))
    value = record.get("value")
    if value is not None and "payload" in value:
        payload, schema = value["payload"], value["schema"]
        for name in ("ts_ms", "ts_us", "ts_ns"):
            if schema.get("name", "").endswith(".Envelope"):
                payload.pop(name, None)
        if isinstance(payload.get("source"), dict):
            payload["source"].pop("version", None)
        if payload.get("status") == "BEGIN":
            payload.pop("ts_ms", None)
        block = payload.get("transaction")
        if isinstance(block, dict):
            block.pop("transaction_epoch", None)
            block.pop("transaction_rank", None)
        for f in schema.get("fields", []):
            if f.get("field") == "transaction":
                f["fields"] = [
                    x for x in f["fields"] if x["field"] not in ("transaction_epoch", "transaction_rank")
                ]
    headers = record.get("headers") or {}
    if "__debezium.context.runId" in headers:
        headers["__debezium.context.runId"] = "<run id>"
    headers.pop("__tidemark.order", None)
    headers.pop("__tidemark.ends", None)
    return record


def differences(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], modes: dict[str, str] | None = None
) -> list[str]:
    """Per topic, record by record in order: what differs (path and both values), but for
    the intended value differences (`tolerated`)."""
    out: list[str] = []
    by_topic: dict[str, tuple[list, list]] = {}
    for r in ours:
        by_topic.setdefault(r["topic"], ([], []))[0].append(normalised(r))
    for r in theirs:
        by_topic.setdefault(r["topic"], ([], []))[1].append(normalised(r))
    for topic, (a, b) in sorted(by_topic.items()):
        if topic.endswith(".transaction"):  # END's data_collections follow Debezium's map order: a set
            for side in (a, b):
                for r in side:
                    collections = r["value"]["payload"].get("data_collections")
                    if collections:
                        collections.sort(key=lambda c: c["data_collection"])
        if len(a) != len(b):
            out.append(f"{topic}: Tidemark {len(a)} records, Debezium {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += [
                f"{topic}[{i}] {_text(path)}: Tidemark {p!r} != Debezium {q!r}"
                for path, p, q in _diff(x, y, ())
                if not tolerated(path, p, q, y, modes or {})
            ]
    return out


def tolerated(path: tuple, ours: Any, theirs: Any, record: dict[str, Any], modes: dict[str, str]) -> bool:
    """An intended value difference (INTENDED) at `path` of Debezium's `record`."""
    schema = _field_schema(path, record)
    if schema is None:
        return False
    name, kind = schema.get("name"), schema.get("type")
    if path[-1] == "default":
        if kind == "int64" and name is None and isinstance(ours, int) and ours < 0:
            return theirs == (1 << 63) - 1  # BIGINT UNSIGNED default above 2^63 in long mode
        if kind in ("bytes", "string") and isinstance(theirs, str):  # binary default with escapes
            decode = _binary_decoder(modes.get("binary.handling.mode", "bytes"))
            try:
                return decode(theirs).replace(b"\\0", b"\0") == decode(ours) != decode(theirs)
            except ValueError:
                return False
        return False
    if name == "io.debezium.time.ZonedTimestamp":  # zero TIMESTAMP in a nullable column
        return ours is None and isinstance(theirs, str) and theirs.startswith("1970-01-01T00:00:00")
    if name == "io.debezium.time.Year":  # YEAR 0000
        return (ours, theirs) == (0, 1900)
    return False


def _binary_decoder(mode: str) -> Any:
    if mode == "hex":
        return bytes.fromhex
    if mode == "base64-url-safe":
        return base64.urlsafe_b64decode
    return base64.b64decode


def _field_schema(path: tuple, record: dict[str, Any]) -> dict[str, Any] | None:
    """The field schema a payload value or a schema attribute at `path` belongs to."""
    if path[:2] == ("value", "schema") and len(path) >= 3:
        node: Any = record
        for step in path[:-1]:
            node = node[step]
        return node if isinstance(node, dict) else None
    if path[:2] == ("value", "payload") and len(path) == 4 and path[2] in ("before", "after"):
        for part in record["value"]["schema"]["fields"]:
            if part["field"] == path[2]:
                return next((f for f in part["fields"] if f["field"] == path[3]), None)
    return None


def _text(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _diff(a: Any, b: Any, path: tuple) -> list[tuple[tuple, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(((*path, k), a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                out += _diff(a[k], b[k], (*path, k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _diff(x, y, (*path, i))
        return out
    return [] if a == b else [(path, a, b)]


class RecorderProcess:
    """The recorder JVM and its line protocol (see Recorder.java)."""

    def __init__(self, plan: Path, log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            recorder_command(plan),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "wb"),  # noqa: SIM115
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self._arrived: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._arrived.put(line.strip())
        self._arrived.put(None)

    def expect(self, predicate: Any, timeout: float, what: str) -> None:
        """Take the recorder's lines until `predicate(lines)` holds."""
        deadline = time.monotonic() + timeout
        ended = False
        while not predicate(self.lines):
            failed = [line for line in self.lines if line.startswith("ENGINE-FAILED")]
            if failed:
                raise RuntimeError(f"a Debezium engine failed: {failed[0]}")
            remaining = deadline - time.monotonic()
            if remaining <= 0 or ended:
                raise AssertionError(
                    f"recorder: no {what} after {timeout:.0f}s (lines {self.lines[-10:]}); "
                    f"its log: {self.log.read_text()[-3000:]}"
                )
            try:
                line = self._arrived.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                ended = True
            else:
                self.lines.append(line)

    def check(self, paths: list[Path], timeout: float = 60) -> list[str]:
        """JsonConverter.toConnectData over each file of Tidemark records; the failures."""
        assert self.proc.stdin is not None
        for path in paths:
            self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.close()
        self.expect(
            lambda lines: sum(line.startswith("CHECKED ") for line in lines) == len(paths), timeout, "check"
        )
        self.proc.wait(30)
        return [line for line in self.lines if line.startswith("FAIL ")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def wait_ready(pairs: list[Pair], recorder: RecorderProcess, insert_ready: Any, database: str) -> None:
    """Insert `ready` rows until every Debezium engine and every Tidemark streamer emitted one."""

    def tidemark_ready(pair: Pair) -> bool:
        assert pair.connector is not None
        return (pair.connector.eventlog / f"{pair.name}.{database}.{READY}").is_dir()

    deadline = time.monotonic() + 120
    while True:
        insert_ready()
        try:
            recorder.expect(
                lambda lines: sum(line.startswith("READY ") for line in lines) == len(pairs), 1, "READY"
            )
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            continue
        wait_for(lambda: all(tidemark_ready(p) for p in pairs), 60, message="every streamer to stream")
        return
