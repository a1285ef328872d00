"""`make demo`: the main job through Airflow, from a live MariaDB to Delta tables equal to it.

Steps, on the local stack (MariaDB and `airflow standalone`, started by `make demo`):

1. stop what an earlier demo left running (the streamer DAG, a snapshot run) and reset
   the demo database and every file of the demo connector — so the demo can run again;
2. create the shop schema with some history (rows that exist before capture starts);
3. start the streamer: unpause `tidemark_stream_demo` and trigger a run;
4. run the write workload (multi-table transactions, updates of old rows, deletes, an
   ALTER TABLE and a primary-key change) and wait until the streamer has committed it;
5. trigger an ad-hoc snapshot through Airflow's REST API with the fields of the UI's
   trigger form as `conf`: validate → signal → Spark chunk job → deferred wait for the
   windows' release → merge into Delta → Asset events;
6. print what was captured and, side by side, each source table and its Delta table
   (row count and checksum: equal), with the Airflow UI's address and login.

The streamer DAG keeps running afterwards; `make down` stops the stack.

`--source vitess` (`make demo DEMO=vitess`) runs the same job on the Vitess connector
(`connectors/demo_vitess.yaml`): the shop on a two-shard keyspace behind the VTGate
double, beside the MariaDB one (`demo/sources.py`); its Delta tables equal the union of
the shards.

    python -m demo.run [--source mysql|vitess] [--history N] [--orders N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config
from demo import streamer_dag
from demo.airflow_api import AirflowAPI, AirflowAPIError
from demo.sources import DATABASE, SOURCES, TABLES, MariaDbDemo
from demo.terminal import SnapshotProgress, process_output_to, step
from demo.workload import run_workload, seed_history

ROOT = Path(__file__).resolve().parent.parent
CONNECTOR_FILE = MariaDbDemo.connector_file
SPARK_LOG = ROOT / ".local" / "demo" / "spark.log"


def snapshot_form(config: ConnectorConfig) -> dict[str, Any]:
    """The trigger form of `tidemark_snapshot` as a user fills it in for the demo, with
    the form's default release mode (`lakehouse`: the merge applies the staged windows,
    which the chunk job staged with the connector's column rules, so customers.email
    lands hashed as its events carry it)."""
    return {
        "connector": config.name,
        "data_collections": [f"{DATABASE}\\.({'|'.join(TABLES)})"],
        "snapshot_type": "incremental",
        "additional_conditions": [],
        "surrogate_key": None,
        "chunk_size": 200,
        "parallelism": 2,
        "release_mode": "lakehouse",
    }


def main(argv: list[str] | None = None) -> int:
    from scripts import services

    # The login to print: the development password, unless the user chose their own.
    password = services.AIRFLOW_PASSWORD_DEFAULT
    if services.AIRFLOW_PASSWORD_ENV in os.environ:
        password = f"${services.AIRFLOW_PASSWORD_ENV}"
    login = f"{services.AIRFLOW_USER} / {password}"
    for key, value in services.environment().items():  # the local stack's ports and dev credentials
        os.environ.setdefault(key, value)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=100, help="orders placed before capture starts")
    parser.add_argument("--orders", type=int, default=300, help="orders of the live workload")
    parser.add_argument("--source", choices=sorted(SOURCES), default="mysql", help="the demo's source")
    args = parser.parse_args(argv)
    started = time.monotonic()
    source = SOURCES[args.source]

    config = load_config(source.connector_file)
    try:
        api = AirflowAPI.local()
        for dag_id in (streamer_dag.stream_dag(config), streamer_dag.SNAPSHOT_DAG):
            api.wait_for_dag(dag_id)
    except AirflowAPIError as exc:
        print(f"error: {exc}\n(`make demo` starts Airflow; or `python -m scripts.services up airflow`)")
        return 1

    step("stopping what an earlier demo left running, resetting the demo database and connector")
    streamer_dag.stop(api, config)
    try:
        conn = source.connect()
    except Exception as exc:
        services_up = " ".join(source.services)
        print(
            f"error: cannot reach the {source.name} source ({exc}); `python -m scripts.services up {services_up}`"
        )
        return 1
    source.reset(conn)
    reset(config)
    history = seed_history(conn, DATABASE, orders=args.history)
    step(f"shop history before capture: {history['transactions']} transactions (a snapshot will bring them)")

    run_id = streamer_dag.start(api, config)
    step(f"streamer running: {streamer_dag.stream_dag(config)} run {run_id}")
    stats = run_workload(conn, DATABASE, orders=args.orders)
    head = source.head(conn)
    streamer_dag.wait(lambda: source.caught_up(config, head), 300, "the streamer to catch up")
    step(f"workload: {stats['transactions']} transactions, all committed by the streamer (source at {head})")

    if not snapshot(api, config):
        return 1
    return report(config, conn, api.url, login, started)


def reset(config: ConnectorConfig) -> None:
    """The connector's state, event log, Delta tables, merge checkpoint and staged
    windows removed (the source recreated its database before)."""
    from tidemark_airflow.lakehouse import lakehouse_paths

    from cdc_core.pipeline.state import local_log_directory

    paths = [
        config.state_directory(),
        local_log_directory(config),
        *map(Path, lakehouse_paths(config).values()),
    ]
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    if config.get("sink.type") == "kafka":
        delete_topics(config)


def delete_topics(config: ConnectorConfig) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": config.get("sink.kafka.bootstrap.servers")})
    prefix = config.topic_prefix
    topics = [t for t in admin.list_topics(timeout=10).topics if t == prefix or t.startswith(prefix + ".")]
    for future in admin.delete_topics(topics).values() if topics else ():
        future.result()


def snapshot(api: AirflowAPI, config: ConnectorConfig) -> bool:
    """Trigger `tidemark_snapshot` as the UI's form does and follow it to its end."""
    dag_id = streamer_dag.SNAPSHOT_DAG
    api.unpause(dag_id)
    run_id = api.trigger(dag_id, snapshot_form(config))
    step(f"ad-hoc snapshot: POST /api/v2/dags/{dag_id}/dagRuns with the form as conf → run {run_id}")

    progress = SnapshotProgress(config)
    try:
        state = api.wait_for_run(
            dag_id, run_id, timeout=1200, on_change=progress.tasks_changed, on_poll=progress.poll
        )
    finally:
        progress.done()
    if state != "success":
        failed = [t for t, s in api.task_states(dag_id, run_id).items() if s == "failed"]
        print(f"the snapshot run {run_id} failed in {failed}; its task logs are in the Airflow UI")
        return False
    step("snapshot released and merged into Delta")
    return True


def report(config: ConnectorConfig, conn: Any, airflow_url: str, login: str, started: float) -> int:
    from tidemark_airflow.lakehouse import lakehouse_paths

    from cdc_core.cli import status_document
    from demo.captured import events_by_topic, print_captured
    from demo.compare import compare_tables, print_side_by_side
    from spark_jobs.session import build_session

    print_captured(events_by_topic(config), config.topic_prefix, DATABASE)
    print(f"committed position: {status_document(config, check_source=False)['committed_position']}")

    step("comparing every source table with its Delta table")
    with process_output_to(SPARK_LOG):  # Spark's JVM logs to a file, not between our lines
        spark = build_session("tidemark-demo-compare", master="local[2]", conf={"spark.ui.enabled": "false"})
        try:
            results = compare_tables(spark, conn, config, DATABASE, lakehouse_paths(config)["delta_root"])
        finally:
            spark.stop()
    print_side_by_side(results)
    equal = all(r.equal for r in results)
    print(
        "\nDelta equals the source: every table has the same rows and checksum"
        if equal
        else "\nMISMATCH between the source and Delta"
    )
    print(
        f"\nAirflow UI:   {airflow_url}  (login {login})\n"
        f'Status page:  {airflow_url}/tidemark/  ("Tidemark" in the UI\'s navigation)\n'
        f"Delta tables: {lakehouse_paths(config)['delta_root']}\n"
        f"Spark's log:  {SPARK_LOG}\n"
        f"The streamer keeps running under Airflow ({streamer_dag.stream_dag(config)}); `make down` stops the stack.\n"
        f"demo finished in {time.monotonic() - started:.0f}s"
    )
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
