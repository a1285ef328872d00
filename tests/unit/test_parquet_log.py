"""The Parquet event log keeps the JSON-lines log's promises (dense offsets, the same
records byte for byte, one writer, nothing lost or renumbered by a crash) while storing
each payload as typed columns with its schema once per file."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from cdc_core.connectors.mysql.source_info import source_schema
from cdc_core.events.connect_decimal import encode_decimal
from cdc_core.events.envelope import Record
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.sinks import parquet_log, parquet_log_reader
from cdc_core.sinks.local_log import LocalEventLog, LocalEventLogReader, LocalLogError
from cdc_core.sinks.parquet_log import ParquetEventLog
from cdc_core.source import RowChange, SnapshotRelease
from tests.unit.test_dispatcher import CUSTOMERS, FakeSource, config, transaction

WIDE = TableSchema(
    TableId("shop", "wide"),
    (
        Column("id", "BIGINT", nullable=False),
        Column("price", "DECIMAL", length=12, scale=3),
        Column("huge", "DECIMAL", length=60, scale=10),
        Column("raw", "VARBINARY", length=16),
        Column("at", "DATETIME", length=6),
        Column("day", "DATE"),
        Column("ratio", "FLOAT"),
        Column("big", "DOUBLE"),
        Column("tiny", "TINYINT"),
        Column("flag", "BIT", length=1),
        Column("doc", "JSON"),
        Column("note", "TEXT"),
    ),
    ("id",),
)
GEO = TableSchema(
    TableId("shop", "places"), (Column("id", "INT", nullable=False), Column("where", "POINT")), ("id",)
)
POINT = b"\x00\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08@\x00\x00\x00\x00\x00\x00\x10@"


def row(table, op, before=None, after=None) -> RowChange:
    """A row change with a whole source block, as every source gives one: a typed file
    writes each field its schema declares (null when absent), as Connect's converter does."""
    source = {f["field"]: None for f in source_schema("mysql")["fields"]}
    source |= {"version": "1", "connector": "mysql", "name": "srv", "ts_ms": 1000, "snapshot": "false"}
    source |= {"db": table.id.database, "table": table.id.table, "server_id": 1, "file": "f.000001", "pos": 4}
    source |= {"row": 0, "ts_us": 1000000, "ts_ns": 1000000000}
    return RowChange(table, op, before, after, source, 1000)


def wide_row(n: int) -> tuple:
    return (
        n,
        decimal.Decimal("12345.678") * n,
        decimal.Decimal("1234567890123456789012345678901234567890.0123456789"),
        bytes([n % 256, 0, 255]),
        dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
        dt.date(1969, 12, 31),
        1.1,
        1e308,
        -5,
        1,
        '{"k": [1, 2.5, "é"]}',
        'ünï😀 \n "quoted"',
    )


def items() -> list:
    """A stream with every kind of record: inserts, updates, a delete and its tombstone, a
    key change with its headers, a snapshot release, rows with nested columns, BEGIN/END."""
    return [
        *transaction(
            1,
            row(CUSTOMERS, "c", after=(1, "a@x", "Ann")),
            row(WIDE, "c", after=wide_row(1)),
            row(WIDE, "c", after=wide_row(2)),
            row(GEO, "c", after=(1, POINT)),
        ),
        *transaction(
            2,
            row(WIDE, "u", before=wide_row(1), after=(1, *wide_row(3)[1:])),
            row(CUSTOMERS, "u", before=(1, "a@x", "Ann"), after=(2, "a@x", "Ann")),
            row(WIDE, "d", before=wide_row(2)),
            SnapshotRelease(
                WIDE, "s1", "w1", "/staged/w1", 2, ("id",), [(2,)], {"db": "shop", "table": "wide"}, 1000
            ),
        ),
    ]


def written(tmp_path: Path, monkeypatch, extra: str, fmt: str) -> dict[str, list]:
    """The records `items()` give through the dispatcher into a log of `fmt`, read back."""
    monkeypatch.setattr("cdc_core.pipeline.row_events.time.time_ns", lambda: 1_700_000_000_123_456_789)
    monkeypatch.setattr("cdc_core.pipeline.record_writer.uuid.uuid4", lambda: "00000000-run")
    monkeypatch.setattr("cdc_core.sinks.local_log.time.time", lambda: 1_700_000_000.5)
    monkeypatch.setattr("cdc_core.sinks.parquet_log.time.time", lambda: 1_700_000_000.5)
    folder = tmp_path / fmt
    folder.mkdir()
    d = Dispatcher(config(folder, f"{extra}sink.local.format: {fmt}\n"), FakeSource(), AckTracker())
    log = (
        ParquetEventLog(folder / "log", *_converters(extra))
        if fmt == "parquet"
        else LocalEventLog(folder / "log")
    )
    log.append(r for r, _ in d.process(items()))
    log.close()
    reader = LocalEventLogReader(folder / "log")
    return {t: [(r.offset, r.ts, r.key, r.value, r.headers) for r in reader.read(t)] for t in reader.topics()}


def _converters(extra: str) -> tuple[bool, bool]:
    return "key.converter.schemas.enable: true" in extra, "value.converter.schemas.enable: true" in extra


@pytest.mark.parametrize(
    "extra",
    [
        "key.converter.schemas.enable: true\nvalue.converter.schemas.enable: true\n",
        "",  # schemaless keys and values
        "value.converter.schemas.enable: true\n",
        "tidemark.schema.references: true\n",  # schemaless values naming their schema
    ],
    ids=["with schemas", "schemaless", "value schemas only", "by reference"],
)
def test_the_same_records_byte_for_byte_as_json_lines(tmp_path, monkeypatch, extra):
    json_lines = written(tmp_path, monkeypatch, extra, "json")
    parquet = written(tmp_path, monkeypatch, extra, "parquet")
    assert parquet == json_lines
    assert "srv.shop.wide" in parquet and len(parquet["srv.shop.wide"]) == 5  # 3 events, delete + tombstone
    kinds = {
        p.parent.name: parquet_log_reader.log_format_metadata(p)["tidemark.kind"]
        for p in (tmp_path / "parquet" / "log").glob("*/*.parquet")
    }
    assert kinds["srv.shop.wide"] == kinds["srv.shop.customers"] == kinds["srv.transaction"] == "typed"
    # A point is a nested row column and a release has no Connect schema: JSON text.
    assert kinds["srv.shop.places"] == kinds["srv.snapshot_releases"] == "json"


def test_a_typed_file_holds_payload_columns_and_the_schema_once(tmp_path, monkeypatch):
    written(tmp_path, monkeypatch, "value.converter.schemas.enable: true\n", "parquet")
    (path,) = (tmp_path / "parquet" / "log" / "srv.shop.wide").glob("*.parquet")
    table = pq.read_table(path)
    assert table.column_names == ["offset", "ts", "key", "value", "headers"]
    after = table.column("value").combine_chunks().field("after").to_pylist()
    assert after[0]["price"] == encode_decimal(decimal.Decimal("12345.678"), 3)  # Connect's base64
    assert after[0]["raw"] == "AQD/"
    assert after[0]["at"] == 1709251199123456 and after[0]["ratio"] == 1.1
    meta = parquet_log_reader.log_format_metadata(path)
    assert orjson.loads(meta["tidemark.value.schema"])["name"] == "srv.shop.wide.Envelope"
    assert meta["tidemark.value.schemas.enable"] == "true" and meta["tidemark.key.schemas.enable"] == "false"


def rec(
    n: int, schema: bytes = b'{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}]}'
) -> Record:
    envelope = (
        b'{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],'
        b'"optional":true,"field":"after"},{"type":"string","optional":false,"field":"op"}]}'
    )
    return Record("t", b'{"id":%d}' % n, b'{"after":{"id":%d},"op":"c"}' % n, (), schema, envelope)


def plog(path: Path, **options) -> ParquetEventLog:
    """A log whose keys and values are written without their schemas."""
    return ParquetEventLog(path, key_schemas=False, value_schemas=False, **options)


def test_small_flushes_are_compacted_and_read_once_in_order(tmp_path):
    log = plog(tmp_path, compact_files=4)
    for n in range(10):
        log.append([rec(n)])
        log.flush()
    log.close()
    files = sorted(p.name for p in (tmp_path / "t").glob("*.parquet"))
    covering = parquet_log.covering(parquet_log.parquet_segments(tmp_path / "t"))
    assert [(s.first, s.last) for s in covering] == [(0, 9)]  # 0-3, then 0-6 (0-3 and three), then 0-9
    assert len(files) == 13  # the covered files stay for readers that listed them
    reader = LocalEventLogReader(tmp_path)
    assert [r.offset for r in reader.read("t")] == list(range(10))
    assert [orjson.loads(r.key)["id"] for r in reader.read("t", 5, max_records=3)] == [5, 6, 7]
    parquet_log._delete_covered(tmp_path / "t", before=time.time() + 1)
    assert len(list((tmp_path / "t").glob("*.parquet"))) == 1
    assert [r.offset for r in reader.read("t")] == list(range(10))
    assert ParquetEventLog(tmp_path).end_offset("t") == 10


def test_the_landing_runs_nicer_than_the_streamer_that_hands_it_records(tmp_path, monkeypatch):
    """Arrow's parse and the files' writing compete for the CPU with the source's reading,
    which bounds the stream: on busy CPUs the reading goes first."""
    priorities = []
    write = ParquetEventLog._write

    def watched(self, *args):
        priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return write(self, *args)

    monkeypatch.setattr(ParquetEventLog, "_write", watched)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    log = plog(tmp_path)
    for n in range(2):
        log.append([rec(n)])
        log.flush()
    log.close()
    assert priorities == [min(19, mine + parquet_log.LANDING_NICE)] * 2
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # the caller's is untouched
    assert [r.offset for r in LocalEventLogReader(tmp_path).read("t")] == [0, 1]


def test_compaction_never_takes_small_files_from_both_sides_of_a_large_one(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_log, "COMPACTED_BYTES", 4096)
    log = plog(tmp_path, compact_files=2)
    log.append([rec(0)])
    log.flush()
    log.append([rec(n) for n in range(1, 400)])  # a file over COMPACTED_BYTES
    log.close()
    log = plog(tmp_path, compact_files=2)  # a writer that starts after the large file
    for n in (400, 401):
        log.append([rec(n)])
        log.flush()
    log.close()
    covering = parquet_log.covering(parquet_log.parquet_segments(tmp_path / "t"))
    assert [(s.first, s.last) for s in covering] == [(0, 0), (1, 399), (400, 401)]
    assert [r.offset for r in LocalEventLogReader(tmp_path).read("t")] == list(range(402))


def test_a_polled_file_is_rendered_once_and_a_rewritten_log_is_read_anew(tmp_path, monkeypatch):
    """Readers poll: a log file (immutable once named) renders once; a log deleted and
    written again under the same names gives its new records, never the cached ones."""
    renders = []
    render = parquet_log_reader._render
    monkeypatch.setattr(parquet_log_reader, "_render", lambda *a: renders.append(a[1]) or render(*a))
    log = plog(tmp_path)
    log.append([rec(n) for n in range(3)])
    log.close()
    reader = LocalEventLogReader(tmp_path)
    for _ in range(3):
        assert [orjson.loads(r.key)["id"] for r in reader.read("t", 1)] == [1, 2]
    assert len(renders) == 1
    for path in (tmp_path / "t").glob("*.parquet"):
        path.unlink()
    log = plog(tmp_path)
    log.append([rec(n) for n in range(10, 13)])
    log.close()
    assert [orjson.loads(r.key)["id"] for r in reader.read("t")] == [10, 11, 12]
    assert len(renders) == 2


def test_a_json_lines_log_continues_in_parquet_with_its_offsets(tmp_path):
    old = LocalEventLog(tmp_path)
    old.append([Record("t", b'{"id":%d}' % n, b'{"old":%d}' % n) for n in range(3)])
    old.close()
    log = plog(tmp_path)
    assert log.append([rec(3), rec(4)]) == [("t", 3), ("t", 4)]
    log.close()
    reader = LocalEventLogReader(tmp_path)
    assert [r.offset for r in reader.read("t")] == [0, 1, 2, 3, 4]
    assert [r.value for r in reader.read("t", 2)][:2] == [b'{"old":2}', b'{"after":{"id":3},"op":"c"}']
    assert reader.end_offset("t") == 5
    with pytest.raises(LocalLogError, match=r"continues in Parquet \(topic t\).*sink.local.format: parquet"):
        LocalEventLog(tmp_path)  # its own count would start at 3 and number records again
    assert plog(tmp_path).append([rec(5)]) == [("t", 5)]  # the refusal let go of the lock


def test_compaction_keeps_files_written_with_and_without_schemas_apart(tmp_path):
    """A typed file's footer says whether its records read back with their schemas: files
    of one Connect schema written before and after the converters' setting changed are
    never compacted into one, which would give the later records the earlier footer."""
    log = ParquetEventLog(tmp_path, key_schemas=False, value_schemas=True, compact_files=2)
    log.append([rec(0)])
    log.close()
    log = plog(tmp_path, compact_files=2)
    log.append([rec(1)])
    log.flush()
    log.append([rec(2)])
    log.close()
    segments = parquet_log.covering(parquet_log.parquet_segments(tmp_path / "t"))
    assert [(s.first, s.last) for s in segments] == [(0, 0), (1, 2)]  # the two schemaless ones compacted
    values = [r.value for r in LocalEventLogReader(tmp_path).read("t")]
    assert orjson.loads(values[0])["payload"] == {"after": {"id": 0}, "op": "c"}
    assert values[1:] == [b'{"after":{"id":1},"op":"c"}', b'{"after":{"id":2},"op":"c"}']


def test_a_row_without_columns_lands_as_json_text(tmp_path):
    """Parquet has no struct without fields (a table whose columns are all excluded)."""
    schema = b'{"type":"struct","fields":[{"type":"struct","fields":[],"optional":true,"field":"after"}]}'
    log = plog(tmp_path)
    log.append([Record("t", b'{"id":1}', b'{"after":{}}', (), rec(1).key_schema, schema)])
    log.close()
    (file,) = (tmp_path / "t").glob("*.parquet")
    assert pq.read_metadata(file).metadata[b"tidemark.kind"] == b"json"
    assert [r.value for r in LocalEventLogReader(tmp_path).read("t")] == [b'{"after":{}}']


def test_a_payload_that_does_not_match_its_schema_is_refused_and_nothing_lands(tmp_path):
    log = ParquetEventLog(tmp_path)
    bad = rec(1)
    bad.value = b'{"after":{"id":"one"},"op":"c"}'
    log.append([rec(0), bad])
    with pytest.raises(LocalLogError, match="do not match their Connect schema"):
        log.flush()
    assert not list((tmp_path / "t").glob("*.parquet"))


def test_one_writer_at_a_time_whatever_the_format(tmp_path):
    log = ParquetEventLog(tmp_path)
    with pytest.raises(LocalLogError, match="another process is writing"):
        LocalEventLog(tmp_path)
    log.close()
    LocalEventLog(tmp_path).close()


WRITER = """
import sys
from pathlib import Path
from tests.unit.test_parquet_log import rec
from cdc_core.sinks.parquet_log import ParquetEventLog
log = ParquetEventLog(Path(sys.argv[1]), False, False, compact_files=8)
n = 0
while True:
    log.append([rec(i) for i in range(n, n + 500)])
    log.flush()
    n += 500
    print(n, flush=True)
"""


def test_a_writer_killed_mid_write_keeps_every_flushed_record_and_renumbers_none(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2]
    )
    acknowledged = 0
    assert proc.stdout is not None
    while acknowledged < 20_000:
        acknowledged = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log = plog(tmp_path)
    end = log.end_offset("t")
    assert not list((tmp_path / "t").glob(".*.tmp"))  # a file cut before its rename is gone
    log.append([rec(end)])
    log.close()
    records = list(LocalEventLogReader(tmp_path).read("t"))
    assert end >= acknowledged
    assert [r.offset for r in records] == list(range(end + 1))
    assert [orjson.loads(r.key)["id"] for r in records] == list(range(end + 1))
