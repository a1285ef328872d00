"""Start, stop and check Tidemark's local services: MariaDB, Kafka (KRaft) and Airflow.

Everything runs on loopback from the project's own installs (Debian's MariaDB, the
Maven-fetched Kafka jars, the .venv's Airflow) with its data under the ignored
``.local/`` folder, so a developer machine and CI behave the same and nothing touches a
system-wide service.

    python -m scripts.services up [NAME ...]      start (idempotent) and wait until ready
    python -m scripts.services down [NAME ...]    stop; no process of ours is left
    python -m scripts.services status [NAME ...]  (exit code 1 when a named one is stopped)
    python -m scripts.services env                print the environment the stack uses
    python -m scripts.services run NAME ... -- CMD
        start what is not running, run CMD with the stack's environment, then stop
        only what this call started (TIDEMARK_KEEP_SERVICES=1 keeps them running)

Names: mariadb, vitess (the VTGate test double's four MariaDB shard servers), vtgate (the
double itself on fixed ports, for the Vitess demo; starts vitess), kafka, spark-connect
(a Spark Connect server chunk jobs attach to with --remote), mongodb (the MongoDB test
server, a replica set rs0 in memory), airflow-db (metadata database migrated, no
process), airflow (``airflow standalone``: api-server, scheduler, dag-processor,
triggerer). ``up`` without names starts mariadb, kafka and airflow, and mongodb too when
a connector file of the connectors folder is a MongoDB one.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

from scripts.services.airflow import Airflow, AirflowDB
from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.kafka import Kafka
from scripts.services.mariadb import MariaDB
from scripts.services.mongodb import MongoDB, mongodb_connector_files
from scripts.services.settings import (
    ADMIN_PASSWORD_ENV,
    AIRFLOW_PASSWORD_ENV,
    CDC_PASSWORD_ENV,
    DEMO_SOURCE_CONN_ENV,
    DEMO_VITESS_CONN_ENV,
    environment,
)
from scripts.services.spark_connect import SparkConnect
from scripts.services.vitess import VitessShards, VTGateDouble

_VITESS = VitessShards()  # also the shard servers `vtgate` starts first
SERVICES: dict[str, Service] = {
    s.name: s
    for s in (
        MariaDB(),
        _VITESS,
        VTGateDouble(_VITESS),
        Kafka(),
        SparkConnect(),
        MongoDB(),
        AirflowDB(),
        Airflow(),
    )
}
DEFAULT_UP = ["mariadb", "kafka", "airflow"]


def default_up() -> list[str]:
    """What `up` without names starts: DEFAULT_UP, and the MongoDB test server when a
    connector file of the connectors folder is a MongoDB one."""
    if not mongodb_connector_files():
        return list(DEFAULT_UP)
    return ["mariadb", "kafka", "mongodb", "airflow"]  # the streamers Airflow runs find it up


def _select(names: list[str], default: list[str]) -> list[Service]:
    unknown = [n for n in names if n not in SERVICES]
    if unknown:
        raise ServiceError(f"unknown service(s) {unknown}; known: {sorted(SERVICES)}")
    return [SERVICES[n] for n in (names or default)]


def up(names: list[str], started: list[Service] | None = None) -> list[Service]:
    """Start what is not running; `started` (given by `run`) collects each as it starts,
    so a later service's failure still leaves the earlier ones to be stopped."""
    started = [] if started is None else started
    for svc in _select(names, default_up() if not names else []):
        t0 = time.monotonic()
        if svc.start():
            started.append(svc)
            print(f"{svc.name}: started in {time.monotonic() - t0:.1f}s  {svc.describe()}")
        else:
            print(f"{svc.name}: ready  {svc.describe()}")
    return started


def down(names: list[str]) -> None:
    for svc in reversed(_select(names, list(SERVICES))):
        if svc.stop():
            print(f"{svc.name}: stopped")


def status(names: list[str] | None = None) -> int:
    """Each service's state (all of them, or those named); 0 when every named one runs."""
    chosen = _select(names, list(SERVICES)) if names else list(SERVICES.values())
    for svc in chosen:
        state = "running" if svc.running() else "stopped"
        if isinstance(svc, AirflowDB):
            state = "migrated" if svc.running() else "not migrated"
        print(f"{svc.name:13s} {state:13s} {svc.describe()}")
    return 0 if not names or all(svc.running() for svc in chosen) else 1


def run(names: list[str], cmd: list[str]) -> int:
    started: list[Service] = []
    try:
        up(names, started)  # (one that fails to start leaves those before it in `started`)
        env = {**os.environ, **environment()}
        return subprocess.call(cmd, env=env)
    finally:
        if os.environ.get("TIDEMARK_KEEP_SERVICES") != "1":
            for svc in reversed(started):
                svc.stop()
                print(f"{svc.name}: stopped (started for this run)")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    verb, rest = argv[0], argv[1:]
    try:
        if verb == "up":
            up(rest)
            return 0
        if verb == "down":
            down(rest)
            return 0
        if verb == "status":
            return status(rest)
        if verb == "env":
            for k, v in environment().items():
                secret = k in (
                    CDC_PASSWORD_ENV,
                    ADMIN_PASSWORD_ENV,
                    AIRFLOW_PASSWORD_ENV,
                    DEMO_SOURCE_CONN_ENV,
                    DEMO_VITESS_CONN_ENV,
                )
                print(f"export {k}={'***' if secret else shlex.quote(v)}")  # never print a secret
            return 0
        if verb == "run":
            if "--" not in rest:
                print("usage: run NAME ... -- COMMAND", file=sys.stderr)
                return 2
            i = rest.index("--")
            return run(rest[:i], rest[i + 1 :])
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(__doc__)
    return 2
