"""Conformance: `snapshot.mode: initial_only` snapshots every captured table and stops by
itself with every row delivered, and a later start stops at once without streaming;
`snapshot.select.statement.overrides` filter that snapshot (rendered by each source's
chunk reader with bound values), or are refused with the reason where the source cannot
apply them; the Spark chunk job closes windows by deleting their open rows under
`insert_delete`, and the snapshot is whole with no watermark row left."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from tests.conformance.source_fixture import Delete, Insert, Update, insert_rows
from tests.conformance.test_snapshots import seeded, signal, synced
from tests.support.snapshots import finished
from tests.support.streamer import payloads, read_log, start_process, stop_process, wait_for, wait_process

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

OVERRIDES = "snapshot.select.statement.overrides"


def applied(source, c, ns: str, table: str) -> list[dict]:
    """The table as a consumer applying its topic in log order holds it."""
    state: dict = {}
    for record_key, value, _ in read_log(c, source.topic(c, ns, table)):
        key = tuple(sorted(source.key(record_key).items()))
        if value is None or value["op"] == "d":
            state.pop(key, None)
        else:
            state[key] = source.row(value["after"])
    return sorted(state.values(), key=lambda r: tuple(str(v) for v in r.values()))


def run_until_it_stops(c, timeout: float = 240) -> int:
    log = c.path.with_suffix(".log")
    proc = start_process(c, log=log)
    try:
        return wait_process(proc, timeout, log)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_initial_only_delivers_every_row_and_stops(source, ns, tmp_path):
    seeded(source, ns, 700)
    source.create_table(ns, "u", {"id": "int", "name": "text"}, ["id"])
    source.apply(ns, insert_rows("u", ({"id": i, "name": f"n{i}"} for i in range(40))))
    c = source.connector(
        tmp_path, ns, {"snapshot.mode": "initial_only", "incremental.snapshot.chunk.size": 64}
    )
    assert run_until_it_stops(c) == 0, c.path.with_suffix(".log").read_text()[-3000:]
    for table in ("t", "u"):
        events = payloads(c, source.topic(c, ns, table))
        assert events and {e["op"] for e in events} <= {"r", "c"}, table  # Vitess's copy phase: op=c
        assert applied(source, c, ns, table) == source.rows(ns, table), table
    before = len(payloads(c, source.topic(c, ns, "t")))
    source.apply(ns, [Update("t", {"id": 1}, {"v": 5}), Insert("t", {"id": 5000, "v": 1})])
    assert run_until_it_stops(c, 120) == 0
    assert len(payloads(c, source.topic(c, ns, "t"))) == before, "initial_only streamed after its snapshot"


def test_select_overrides_filter_the_initial_snapshot(source, ns, tmp_path):
    source.create_table(ns, "orders", {"id": "int", "status": "text", "total": "int"}, ["id"])
    statuses = ("paid", "open", "void")
    rows = [{"id": i, "status": statuses[i % 3], "total": i} for i in range(300)]
    source.apply(ns, insert_rows("orders", rows))
    seeded(source, ns, 50)
    orders = source.collection(ns, "orders")
    extra = {
        "snapshot.mode": "initial_only",
        "incremental.snapshot.chunk.size": 40,
        OVERRIDES: orders,
        # a value that would be SQL if pasted: bound, it is only a string no row holds
        f"{OVERRIDES}.{orders}": f"SELECT * FROM {orders} WHERE (status = 'paid' AND total >= 30) "
        "OR status = 'x'' OR 1=1 --'",
    }
    c = source.connector(tmp_path, ns, extra)
    if source.name == "vitess":
        with pytest.raises(ConfigError, match="Vitess cannot filter its snapshots so"):
            c.config()
        return
    assert run_until_it_stops(c) == 0, c.path.with_suffix(".log").read_text()[-3000:]
    wanted = [r for r in source.rows(ns, "orders") if r["status"] == "paid" and r["total"] >= 30]
    assert len(wanted) == 90
    assert applied(source, c, ns, "orders") == wanted
    assert applied(source, c, ns, "t") == source.rows(ns, "t")  # a table without an override: whole


def test_the_spark_chunk_job_closes_windows_by_deleting_their_open_rows(source, ns, tmp_path, spark):
    """Both of the job's readers: Spark's JDBC reader where the source has one
    (MySQL/MariaDB), Python on the executors for the others."""
    from spark_jobs.incremental_snapshot import main as chunk_job

    seeded(source, ns, 600)
    c = source.connector(
        tmp_path / "connector", ns, {"incremental.snapshot.watermarking.strategy": "insert_delete"}
    )
    proc = start_process(c)
    staging = tmp_path / "staging"
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        data = {
            "data-collections": [source.collection(ns, "t")],
            "tidemark.reader": "spark",
            "tidemark.chunk-size": 100,
        }
        snap = signal(c, "execute-snapshot", data)
        wait_for(
            lambda: (c.state / "status.json").exists() and _running(c), 60, message="the snapshot to start"
        )
        source.apply(
            ns, [Update("t", {"id": 3}, {"v": 9}), Delete("t", {"id": 4}), Insert("t", {"id": 900, "v": 1})]
        )
        args = ["--config", str(c.path), "--signal", snap, "--staging", str(staging), "--parallelism", "2"]
        assert chunk_job(args) == 0
        wait_for(lambda: finished(c, snap) is not None, 120, interval=0.3, message="the snapshot to finish")
        synced(source, ns, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert applied(source, c, ns, "t") == source.rows(ns, "t")
    windows = sum(t["windows_done"] for t in finished(c, snap)["tables"])
    assert windows >= 6
    assert source.watermarks(ns, [snap]) == 0, "watermark rows left in the signal table"
    assert len(list(Path(staging).rglob("*.close.json"))) >= windows  # a close note per window


def _running(c) -> bool:
    from tests.support.snapshots import status

    return bool((status(c).get("snapshots") or {}).get("running"))
