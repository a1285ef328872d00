"""The same binlog range through Debezium's own connector and through Tidemark: the records
are equal, field for field, but for the differences Tidemark makes on purpose
(tests/support/parity.py INTENDED; README "Differences from Debezium"). And every
Tidemark record loads through Kafka Connect's JsonConverter (toConnectData).

One MariaDB, one short range, one JVM: six configurations, so every handling mode runs
(decimal, BIGINT UNSIGNED, every time precision mode Debezium 3 has for binlog connectors,
every binary mode), each a Debezium
embedded engine and a Tidemark streamer side by side. The workload: every type of the
mapping at its edges (zero dates, NULLs, spatial values, wide decimals), a composite key,
updates, deletes with tombstones, a primary-key change, a multi-table transaction, a
table without a primary key and an ALTER TABLE mid-range."""

from __future__ import annotations

import json

import pytest

from scripts import services
from tests.support import parity
from tests.support.snapshots import reached
from tests.support.streamer import admin, stop_process, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONFIGURATIONS = [
    {},  # Debezium's defaults: precise, long, adaptive_time_microseconds, bytes
    {"decimal.handling.mode": "string", "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "base64"},
    {"decimal.handling.mode": "double", "time.precision.mode": "connect", "binary.handling.mode": "hex"},
    {"time.precision.mode": "isostring", "binary.handling.mode": "base64-url-safe"},
    {"time.precision.mode": "microseconds"},
    {"time.precision.mode": "nanoseconds", "event.processing.failure.handling.mode": "ignore"},
]  # fmt: skip


def test_records_equal_debeziums_connector_and_load_through_kafka_connect(
    tmp_path, mariadb_admin_params, scratch_db
):
    if not (services.ROOT / ".jars" / "recorder").is_dir():
        pytest.fail("the Debezium recorder is not built: run `make jars`", pytrace=False)
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        parity.create_workload_tables(cur)
        for table in (parity.READY, parity.RANGE_END):
            cur.execute(f"CREATE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY)")
        cur.execute("SELECT VERSION()")
        flavor = "mariadb" if "mariadb" in cur.fetchone()[0].lower() else "mysql"
    pairs = [parity.Pair(f"p{i}", modes) for i, modes in enumerate(CONFIGURATIONS)]
    for i, pair in enumerate(pairs):
        parity.start_tidemark(pair, scratch_db, tmp_path, 7100 + i)
        pair.debezium_out = tmp_path / f"debezium-{pair.name}.jsonl"
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "engines": [
                    {
                        "name": p.name,
                        "output": str(p.debezium_out),
                        "properties": parity.debezium_properties(p, scratch_db, tmp_path, 7200 + i, flavor),
                    }
                    for i, p in enumerate(pairs)
                ],
                "ready_table": parity.READY,
                "end_table": parity.RANGE_END,
                "timeout_seconds": 120,
            }
        )
    )
    recorder = parity.RecorderProcess(plan, tmp_path / "recorder.log")
    try:
        with db.cursor() as cur:
            parity.wait_ready(pairs, recorder, lambda: cur.execute("INSERT INTO ready VALUES ()"), scratch_db)
            parity.workload(cur)
            cur.execute("INSERT INTO range_end VALUES ()")
            cur.execute("SELECT @@gtid_binlog_pos")
            head = cur.fetchone()[0]
        recorder.expect(lambda lines: "RECORDED" in lines, 120, "end of the range")
        for pair in pairs:
            wait_for(lambda p=pair: reached(_committed(p), head), 60, message=f"{pair.name} to catch up")
            assert stop_process(pair.proc) == 0
        ours = {p.name: parity.tidemark_records(p) for p in pairs}
        files = []
        for name, records in ours.items():
            files.append(tmp_path / f"tidemark-{name}.jsonl")
            parity.write_for_converter(records, files[-1])
        failures = recorder.check(files)
    finally:
        recorder.kill()
        for pair in pairs:
            if pair.proc is not None and pair.proc.poll() is None:
                pair.proc.kill()
    assert not failures, "Kafka Connect's JsonConverter cannot load Tidemark records:\n" + "\n".join(
        failures[:20]
    )
    problems = []
    for pair in pairs:
        a = parity.in_range(ours[pair.name], pair.name, scratch_db, parity.TABLES)
        b = parity.in_range(parity.debezium_records(pair), pair.name, scratch_db, parity.TABLES)
        assert len(b) > 40, f"{pair.name}: Debezium recorded only {len(b)} records of the range"
        problems += [f"{pair.name} {pair.modes}: {d}" for d in parity.differences(a, b, pair.modes)]
    assert not problems, f"{len(problems)} differences from Debezium:\n" + "\n".join(problems[:60])


def _committed(pair: parity.Pair) -> str | None:
    from tests.support.snapshots import status

    return ((status(pair.connector).get("committed") or {}).get("source") or {}).get("gtids")
