"""The events of one fixed workload, byte for byte as recorded in
`tests/data/mysql_event_sample.jsonl`: a refactoring of the pipeline, the connector seam or
the schema model that changes one byte of what MySQL/MariaDB users receive fails here.

The workload is the Debezium parity test's (every type at its edges, defaults, a composite
key, a primary-key change, a multi-table transaction, a table without a key, an ALTER),
streamed with schema changes and transaction metadata on. Only what differs between any
two runs is replaced before the comparison, each by a placeholder of its own: the
database's name, GTIDs and transaction ranks (numbered in order), binlog file names and
positions, thread ids, processing times, the run id and Tidemark's version.

Every run writes what it got next to its other files (`events.jsonl` in the test's
temporary folder, named in a failure's message); an intended format change copies that file
over the sample (and says so in its commit).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cdc_core.sinks.local_log import LocalEventLogReader
from tests.support import parity
from tests.support.snapshots import reached
from tests.support.streamer import admin, start_process, stop_process, wait_for, write_connector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SAMPLE = Path(__file__).parent.parent / "data" / "mysql_event_sample.jsonl"
PREFIX = "sample"
RUN_ID = "__debezium.context.runId"


def test_a_fixed_workload_gives_the_recorded_events_byte_for_byte(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        parity.create_workload_tables(cur)
        cur.execute("CREATE TABLE range_end (id INT PRIMARY KEY)")
    connector = write_connector(
        tmp_path,
        scratch_db,
        {"include.schema.changes": True, "provide.transaction.metadata": True, "tombstones.on.delete": True},
        prefix=PREFIX,
    )
    proc = start_process(connector)
    try:
        wait_for(lambda: _committed(connector) is not None, 60, message="the streamer to start")
        with db.cursor() as cur:
            parity.workload(cur)
            cur.execute("INSERT INTO range_end VALUES (1)")
            cur.execute("SELECT @@gtid_binlog_pos")
            head = cur.fetchone()[0]
        wait_for(lambda: reached(_committed(connector), head), 60, message="the streamer to catch up")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = normalised_lines(connector.eventlog, scratch_db)
    got = tmp_path / "events.jsonl"
    got.write_text("".join(line + "\n" for line in lines))
    recorded = SAMPLE.read_text().splitlines()
    assert len(recorded) > 60
    hint = f"(this run's events: {got}; copy it over {SAMPLE} if the change is intended)"
    assert len(lines) == len(recorded), (
        f"{len(lines)} records, {len(recorded)} recorded in {SAMPLE.name} {hint}"
    )
    differing = [first_difference(a, b) for a, b in zip(recorded, lines, strict=True) if a != b]
    assert not differing, f"{len(differing)} records differ from {SAMPLE.name} {hint}:\n" + "\n".join(
        differing[:10]
    )


def first_difference(recorded: str, now: str) -> str:
    """Where two lines part: the topic and 120 characters around the first difference."""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
        min(len(recorded), len(now)),
    )
    start = max(0, at - 60)
    return f"{recorded.split(chr(9))[0]} at {at}: recorded ...{recorded[start : at + 60]}... now ...{now[start : at + 60]}..."


def normalised_lines(eventlog: Path, database: str) -> list[str]:
    """Every record of every topic (topics by name, records in log order) as one line:
    topic, key, value and headers, tab-separated, the bytes as written but for what differs
    between runs. Schema changes of other databases are left out: the connector captures
    every database's CREATE and DROP DATABASE, as Debezium's does without a database list,
    and the tests running beside this one on the same server make and drop theirs."""
    raw = []
    reader = LocalEventLogReader(eventlog)
    for topic in sorted(p.name for p in eventlog.iterdir() if p.is_dir()):
        for r in reader.read(topic):
            if topic == PREFIX and json.loads(r.key or b"{}").get("databaseName") != database:
                continue
            headers = {k: v.decode() for k, v in sorted(r.headers.items())}
            if RUN_ID in headers:  # a new random id per run
                headers[RUN_ID] = "<run>"
            headers = json.dumps(headers, ensure_ascii=False)
            parts = [topic, (r.key or b"-").decode(), (r.value or b"-").decode(), headers]
            raw.append("\t".join(parts))
    text = "\n".join(raw).replace(database, "<db>")
    text = _numbered(text, r'"(\d+-\d+-\d+)"', "G")  # GTIDs, as transaction ids and in source blocks
    # Ranks, in transaction blocks and in a schema change's order header, numbered as one.
    text = _numbered(text, r'(?:"transaction_rank":|"__tidemark.order": "\d+,)(\d+)', "R")
    text = re.sub(r'"(ts_ms|ts_us|ts_ns|pos|thread)":\d+', r'"\1":0', text)
    text = re.sub(r'"(file|version)":"[^"]*"', r'"\1":"<\1>"', text)
    return [line for line in text.split("\n") if "range_end" not in line]


def _numbered(text: str, pattern: str, letter: str) -> str:
    """Each distinct number the pattern's group matches (GTIDs: numbers joined by dashes)
    replaced by `letter` and its rank among them, in numeric order."""
    found = sorted(set(re.findall(pattern, text)), key=lambda m: [int(p) for p in m.split("-")])
    names = {m: f"{letter}{i + 1}" for i, m in enumerate(found)}

    def name(match: re.Match[str]) -> str:
        whole, number = match.group(0), match.group(1)
        return whole.replace(number, names[number])

    return re.sub(pattern, name, text)


def _committed(connector) -> str | None:
    from tests.support.snapshots import status

    return ((status(connector).get("committed") or {}).get("source") or {}).get("gtids")
