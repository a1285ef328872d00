"""The product's DAGs for a MongoDB connector file, run with `dag.test()` against the
MongoDB test server (or TIDEMARK_MONGODB_URI's deployment), a real streamer, Spark and
Delta: the snapshot DAG lands collections in Delta equal to the source under a writer, the
backfill DAG re-reads exactly its interval of a collection whose times are BSON dates, and
the streamer DAG supervises the streamer and checks its health. The status page's report
shows the connector's position, windows and tables. (The same DAGs with MySQL:
test_airflow_snapshot.py, test_airflow_backfill.py, test_airflow_streamer.py.)"""

from __future__ import annotations

import datetime as dt
import random
import threading

import pytest
from bson import ObjectId, json_util
from tidemark_airflow.connectors import slug

from tests.support.airflow_dags import lakehouse_paths, load_dag, serve, task_states
from tests.support.mongo.capture import connector, delta_documents, source_documents, synced
from tests.support.streamer import Connector, payloads, start_process, stop_process, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DAY = dt.timedelta(days=1)


def served(mongodb, tmp_path, database: str, monkeypatch, extra: dict | None = None) -> Connector:
    """A MongoDB connector alone in the connectors folder the DAG files are generated from,
    with its lakehouse under `tmp_path`."""
    folder = tmp_path / "connectors"
    folder.mkdir()
    c = connector(mongodb, tmp_path, database, {
        **lakehouse_paths(tmp_path),
        **(extra or {}),
    })  # fmt: skip
    return serve(c, folder / "mongo.yaml", monkeypatch)


def started(c: Connector):
    proc = start_process(c)
    wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
    return proc


class Writer(threading.Thread):
    """Random inserts, updates and deletes of `items` until stopped."""

    def __init__(self, mongodb, database: str) -> None:
        super().__init__(daemon=True)
        self.client = mongodb.client()
        self.items = self.client[database]["items"]
        self.stop_flag = threading.Event()
        self.done = 0

    def run(self) -> None:
        rng, next_id = random.Random(7), 10_000
        while not self.stop_flag.wait(0.01):
            roll = rng.random()
            if roll < 0.5:
                self.items.update_one(
                    {"_id": rng.randrange(600)}, {"$inc": {"v": 1}, "$set": {"by": "writer"}}
                )
            elif roll < 0.8:
                self.items.insert_one({"_id": next_id, "v": 0, "tags": ["new", next_id]})
                next_id += 1
            else:
                self.items.delete_one({"_id": rng.randrange(600)})
            self.done += 1

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.client.close()


def test_the_snapshot_dag_lands_collections_in_delta_equal_to_the_source_under_writes(
    mongodb, mongo_db, tmp_path, monkeypatch, spark
):
    from tidemark_airflow.status_page.report import status_report

    from spark_jobs.delta_merge import run_local

    db = mongo_db
    db["items"].insert_many([{"_id": i, "v": 0, "label": f"row {i}"} for i in range(600)])
    db["shapes"].insert_many([{"_id": ObjectId(), "n": i, "tags": list(range(i % 4))} for i in range(50)])
    c = served(mongodb, tmp_path, db.name, monkeypatch)
    name = c.config().name
    proc, writer = started(c), Writer(mongodb, db.name)
    try:
        writer.start()
        dag = load_dag("tidemark_snapshot.py", "tidemark_snapshot")
        form = {
            "connector": name,
            "data_collections": [f"{db.name}\\.(items|shapes)"],
            "chunk_size": 64,
            "parallelism": 2,
            "release_mode": "lakehouse",
        }
        run = dag.test(run_conf=form)
        writer.stop()
        assert run.state == "success", task_states(run)
        assert writer.done > 0
        synced(db, c)
    finally:
        writer.stop_flag.set()
        stop_process(proc)
    root = str(tmp_path / "delta")
    run_local(
        spark, c.config(), root, str(tmp_path / "merge-checkpoint")
    )  # what streamed after the DAG's merge
    for collection in ("items", "shapes"):
        assert delta_documents(spark, root, f"{db.name}.{collection}") == source_documents(db[collection])

    [entry] = status_report()["connectors"]
    assert entry["name"] == name and entry["connector_class"] == "mongodb"
    assert entry["source"] and entry["source"] in mongodb.uri and "@" not in entry["source"]
    assert entry["streamer"]["state"] == "stopped"
    assert entry["committed_position"].startswith("clusterTime ")
    [snapshot] = [s for s in entry["snapshots"] if s["state"] == "finished"]
    windows = {t["table"]: (t["windows_done"], t["windows_total"]) for t in snapshot["tables"]}
    assert windows[f"{db.name}.items"][0] == windows[f"{db.name}.items"][1] >= 600 // 64
    assert windows[f"{db.name}.shapes"] == (1, 1)
    assert {t["table"] for t in entry["delta_tables"]} >= {f"{db.name}.items", f"{db.name}.shapes"}


def test_the_backfill_dag_rereads_exactly_its_interval_of_bson_dates(
    mongodb, mongo_db, tmp_path, monkeypatch, spark
):
    """A backfill writes its interval as quoted timestamps; the documents' times are BSON
    dates (and one a string): the run brings the documents whose time is in [start, end),
    boundaries included, and nothing else but what streamed."""
    db, first = mongo_db, dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
    day = first + DAY  # the interval the run re-reads
    step = dt.timedelta(minutes=53)
    moments = [first - DAY + k * step for k in range(4 * DAY // step)]
    moments += [day, day + DAY, day - dt.timedelta(milliseconds=1), day + DAY - dt.timedelta(milliseconds=1)]
    db["events"].insert_many([{"_id": i, "ts": m, "v": 0} for i, m in enumerate(moments)])
    db["events"].insert_one({"_id": "as-text", "ts": (day + 5 * step).strftime("%Y-%m-%d %H:%M:%S"), "v": 0})
    c = served(mongodb, tmp_path, db.name, monkeypatch, {
        "airflow.backfill.tables": [f"{db.name}.events:ts"],
        "airflow.backfill.schedule": "@daily",
        "airflow.backfill.start.date": first.date().isoformat(),
    })  # fmt: skip
    proc = started(c)
    try:
        streamed = moments.index(first - DAY + 3 * step)  # outside the interval, changed while captured
        db["events"].update_one({"_id": streamed}, {"$set": {"v": 1}})
        dag = load_dag("tidemark_backfill.py", f"tidemark_backfill_{slug(c.config().name)}")
        run = dag.test(logical_date=day + DAY)
        assert run.state == "success", task_states(run)
        assert (run.data_interval_start, run.data_interval_end) == (day, day + DAY)
        synced(db, c)
    finally:
        stop_process(proc)
    delta = delta_documents(spark, str(tmp_path / "delta"), f"{db.name}.events")
    source = source_documents(db["events"])
    expected = {
        k: d for k, d in source.items() if d["_id"] in ("as-text", streamed) or (
            isinstance(d["ts"], dt.datetime) and day <= d["ts"] < day + DAY
        )
    }  # fmt: skip
    ids = {d["_id"] for d in expected.values()}
    edges = [
        moments.index(m)
        for m in (
            day,
            day + DAY,
            day - dt.timedelta(milliseconds=1),
            day + DAY - dt.timedelta(milliseconds=1),
        )
    ]
    assert edges[0] in ids and edges[3] in ids and edges[1] not in ids and edges[2] not in ids
    assert len(ids) > 20
    assert sorted(delta) == sorted(expected)
    assert delta == expected


def test_the_streamer_dag_supervises_a_mongodb_streamer_and_checks_its_health(
    mongodb, mongo_db, tmp_path, monkeypatch
):
    db = mongo_db
    c = served(mongodb, tmp_path, db.name, monkeypatch, {"airflow.streamer.interval.minutes": 1})
    dag = load_dag("tidemark_streamers.py", f"tidemark_stream_{slug(c.config().name)}")
    topic = f"{c.prefix}.{db.name}.t"

    def workload() -> None:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the DAG's streamer")
        with mongodb.client() as client:
            for i in range(200):
                client[db.name]["t"].insert_one({"_id": i, "v": i})

    writer = threading.Thread(target=workload, daemon=True)
    writer.start()
    run = dag.test(mark_success_pattern="^health$")  # the stream task runs its slot, then stops
    writer.join(60)
    assert run.state == "success", task_states(run)
    assert {json_util.loads(e["after"])["_id"] for e in payloads(c, topic)} == set(range(200))

    proc = started(c)
    try:
        run = dag.test(mark_success_pattern="^stream$")
        assert task_states(run)["health"] == "success"
    finally:
        stop_process(proc)
