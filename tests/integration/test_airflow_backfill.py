"""The backfill DAG over two daily data intervals, run with `dag.test()` against the real
MariaDB, streamer, Spark and Delta: each run re-snapshots exactly the rows whose timestamp
lies in its interval (rows on the boundaries included, tested), changes made between runs
reach Delta through the stream, and `airflow backfill create` plans the same runs."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from tests.support.airflow_dags import (
    airflow_cli,
    airflow_connector,
    load_dag,
    planned_runs,
    start_streamer,
    task_states,
)
from tests.support.lakehouse import delta_rows, source_rows
from tests.support.snapshots import read_signal
from tests.support.streamer import Connector, admin, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

DAY = dt.timedelta(days=1)
# Two daily data intervals (UTC wall clock), in the past: backfills refuse future ones.
# Each interval has rows outside it on both sides, so two runs test every boundary.
DAYS = [dt.datetime(2025, 3, d) for d in (1, 2)]
FIRST = DAYS[0]


def utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC)


def backfill_connector(tmp_path, database: str, monkeypatch) -> tuple[Connector, str]:
    """A connector backfilling `<database>.events` on `ts` daily from the first interval;
    its backfill DAG's id."""
    connector = airflow_connector(
        tmp_path,
        database,
        monkeypatch,
        {
            "airflow.backfill.tables": [f"{database}.events:ts"],
            "airflow.backfill.schedule": "@daily",
            "airflow.backfill.start.date": FIRST.date().isoformat(),
        },
    )
    return connector, f"tidemark_backfill_test-{database}"


def timestamps() -> list[dt.datetime]:
    """Every 47 minutes from two days before the intervals to two days after them, plus
    every interval boundary and the last microsecond before it."""
    step = dt.timedelta(minutes=47)
    spread = [FIRST - 2 * DAY + k * step for k in range((len(DAYS) + 4) * DAY // step)]
    edges = [
        FIRST + k * DAY - before
        for k in range(len(DAYS) + 1)
        for before in (dt.timedelta(0), dt.timedelta(microseconds=1))
    ]
    return sorted(set(spread + edges))


class Events:
    """The source table `events`, and the ids the stream must have brought to Delta: rows
    inserted or updated while the streamer runs, whatever their timestamp."""

    def __init__(self, db: Any) -> None:
        self.db, self.streamed = db, set[int]()
        with db.cursor() as cur:
            cur.execute(
                "CREATE TABLE events (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL, v INT NOT NULL, "
                "note VARCHAR(40))"
            )
            rows = [(i, ts, f"event {i}") for i, ts in enumerate(timestamps(), 1)]
            cur.executemany("INSERT INTO events VALUES (%s, %s, 0, %s)", rows)

    def row_at(self, moment: dt.datetime) -> int:
        with self.db.cursor() as cur:
            cur.execute("SELECT id FROM events WHERE ts >= %s ORDER BY ts LIMIT 1", (moment,))
            return cur.fetchone()[0]

    def update(self, moment: dt.datetime, note: str) -> None:
        key = self.row_at(moment)
        with self.db.cursor() as cur:
            cur.execute("UPDATE events SET v = v + 1, note = %s WHERE id = %s", (note, key))
        self.streamed.add(key)

    def delete(self, moment: dt.datetime) -> None:
        key = self.row_at(moment)
        with self.db.cursor() as cur:
            cur.execute("DELETE FROM events WHERE id = %s", (key,))
        self.streamed.discard(key)

    def insert(self, moment: dt.datetime, note: str) -> None:
        with self.db.cursor() as cur:
            cur.execute("INSERT INTO events SELECT MAX(id) + 1, %s, 0, %s FROM events", (moment, note))
            cur.execute("SELECT MAX(id) FROM events")
            self.streamed.add(cur.fetchone()[0])


def change_between_runs(events: Events, done: int) -> None:
    """What happens at the source after the first run, while the streamer runs: changes to
    rows already backfilled, not yet backfilled and outside every interval (never on a
    boundary, so the boundary rows stay what only the snapshots bring)."""
    hours = dt.timedelta(hours=1)
    if done == 1:
        events.update(DAYS[0] + 6 * hours, "backfilled, then updated")
        events.update(DAYS[0] + 6 * hours, "updated twice")
        events.delete(DAYS[0] + 12 * hours)
        events.update(DAYS[1] + 6 * hours, "updated before its backfill")
        events.delete(DAYS[1] + 12 * hours)
        events.insert(DAYS[1] + 7.5 * hours, "inserted before its backfill")
        events.update(FIRST - DAY + 6 * hours, "outside, updated")
        events.insert(DAYS[-1] + DAY + 6 * hours, "outside, inserted")


def expected_in_delta(params: dict[str, Any], database: str, end: dt.datetime, streamed: set[int]):
    """The source's columns and the rows Delta must hold once the intervals up to `end`
    are backfilled: those rows, plus the streamed ones still in the source."""
    columns, rows = source_rows(params, database, "events")
    ts, key = columns.index("ts"), columns.index("id")
    return columns, [r for r in rows if FIRST <= r[ts] < end or r[key] in streamed]


def assert_signal_selects(db: Any, run: Any, database: str, start: dt.datetime, end: dt.datetime) -> None:
    """The run's execute-snapshot signal re-reads `events` where start <= ts < end."""
    signal_id = run.get_task_instance("send_signal").xcom_pull(task_ids="send_signal")
    kind, data = read_signal(db, signal_id)
    table = f"{database}\\.events"
    assert kind == "execute-snapshot"
    assert data["data-collections"] == [table]
    assert data["additional-conditions"] == [
        {
            "data-collection": table,
            "filter": f"`ts` >= '{start:%Y-%m-%d %H:%M:%S}' AND `ts` < '{end:%Y-%m-%d %H:%M:%S}'",
        }
    ]


def test_airflow_backfill_create_plans_one_run_per_interval(tmp_path, monkeypatch, scratch_db):
    """The DAG as the dag-processor serializes it: `airflow backfill create --dry-run` lists
    one run per day, each re-reading that whole day."""
    _, dag_id = backfill_connector(tmp_path, scratch_db, monkeypatch)
    airflow_cli("dags", "reserialize", "--bundle-name", "dags-folder")
    out = airflow_cli(
        "backfill", "create", "--dag-id", dag_id, "--dry-run",
        "--from-date", DAYS[0].date().isoformat(), "--to-date", DAYS[-1].date().isoformat(),
    )  # fmt: skip
    listed = re.findall(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\+00:00", out.split("Runs to be attempted:")[-1])
    assert [dt.datetime.fromisoformat(d) for d in listed] == [utc(d) for d in DAYS], out
    planned = planned_runs(load_dag("tidemark_backfill.py", dag_id), utc(DAYS[0]), utc(DAYS[-1]))
    assert planned == [(utc(d), utc(d), utc(d + DAY)) for d in DAYS]


def test_backfill_over_two_intervals_brings_each_interval_and_loses_no_change(
    tmp_path, monkeypatch, mariadb_admin_params, scratch_db, spark
):
    db = admin(mariadb_admin_params, scratch_db)
    events = Events(db)  # written before the streamer starts: only the backfill brings them
    connector, dag_id = backfill_connector(tmp_path, scratch_db, monkeypatch)
    dag = load_dag("tidemark_backfill.py", dag_id)
    planned = planned_runs(dag, utc(DAYS[0]), utc(DAYS[-1]))
    assert [p[1:] for p in planned] == [(utc(d), utc(d + DAY)) for d in DAYS]
    proc = start_streamer(connector)
    try:
        for done, (_, start, end) in enumerate(planned):
            change_between_runs(events, done)
            # dag.test() gives a run the data interval a manual trigger at its logical date
            # has, the last complete one before it: triggered at the interval's end, the run
            # re-reads the interval the scheduled (or backfill) run of `start` re-reads.
            run = dag.test(logical_date=end)
            assert run.state == "success", task_states(run)
            assert (run.data_interval_start, run.data_interval_end) == (start, end)
            columns, expected = expected_in_delta(
                mariadb_admin_params, scratch_db, end.replace(tzinfo=None), events.streamed
            )
            delta = delta_rows(spark, str(tmp_path / "delta"), scratch_db, "events", columns)
            assert delta == expected, (
                f"after {start:%F}: missing {sorted(set(expected) - set(delta))}, "
                f"unexpected {sorted(set(delta) - set(expected))}"
            )
            assert_signal_selects(db, run, scratch_db, start, end)
    finally:
        stop_process(proc)
