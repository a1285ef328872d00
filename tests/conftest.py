"""Shared fixtures. Services are real: `make test` starts MariaDB and Kafka and migrates
Airflow's metadata database before pytest runs (scripts/services/). When a service is
missing, a test fails with a message saying how to start it; nothing is silently skipped.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import services

# The stack's environment (Airflow home, ports, jar folder) must be in place before any
# test module imports Airflow or pyspark.
for _key, _value in services.environment().items():
    os.environ.setdefault(_key, _value)
# Airflow 3 runs only DAGs that belong to a bundle: the product's dags/ plus the DAGs
# the tests run with dag.test().
TEST_DAGS = Path(__file__).parent / "airflow_dags"
os.environ.setdefault(
    "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
    json.dumps(
        [
            {
                "name": "dags-folder",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {},
            },
            {
                "name": "tidemark-test-dags",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(TEST_DAGS), "refresh_interval": 0},
            },
        ]
    ),
)
# spark-submit and airflow must resolve to the project's environment.
if str(services.VENV_BIN) not in os.environ["PATH"].split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join((str(services.VENV_BIN), os.environ["PATH"]))


def _require_port(name: str, port: int) -> None:
    with socket.socket() as s:
        s.settimeout(1)
        if s.connect_ex(("127.0.0.1", port)) != 0:
            pytest.fail(
                f"{name} is not running on 127.0.0.1:{port}; start it with `make up` "
                f"(`make test` starts it for you)",
                pytrace=False,
            )


@pytest.fixture(scope="session")
def mariadb_params() -> dict:
    """Connection parameters of the CDC user (replication + SELECT)."""
    _require_port("MariaDB", services.PORTS.mariadb)
    return {
        "host": "127.0.0.1",
        "port": services.PORTS.mariadb,
        "user": os.environ["TIDEMARK_DB_USER"],
        "password": os.environ[services.CDC_PASSWORD_ENV],
    }


@pytest.fixture(scope="session")
def mariadb_admin_params() -> dict:
    """Connection parameters of the admin user that creates test schemas and workloads."""
    _require_port("MariaDB", services.PORTS.mariadb)
    return {
        "host": "127.0.0.1",
        "port": services.PORTS.mariadb,
        "user": os.environ["TIDEMARK_ADMIN_USER"],
        "password": os.environ[services.ADMIN_PASSWORD_ENV],
    }


@pytest.fixture
def scratch_db(mariadb_admin_params) -> Iterator[str]:
    """A fresh database for one test, dropped afterwards."""
    import pymysql

    name = f"t_{uuid.uuid4().hex[:10]}"
    with pymysql.connect(**mariadb_admin_params, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    yield name
    # (a connection of its own: a test may have restarted the server meanwhile)
    with pymysql.connect(**mariadb_admin_params, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    _require_port("Kafka", services.PORTS.kafka)
    return os.environ["TIDEMARK_KAFKA_BOOTSTRAP"]


class _RunningAirflow:
    """The Airflow `airflow_server` started, kept from one test that uses it to the next:
    the tests that use it run first and one after another (`pytest_collection_modifyitems`),
    so one start serves them all, and it stops before the first test that does not use it
    (those run `dag.test()` on the same SQLite metadata database and must not meet a
    scheduler there)."""

    def __init__(self) -> None:
        self.context = None
        self.server = None

    def get(self):
        if self.server is not None and not services.Airflow().running():
            self.stop()  # a test stopped it (`make down` in the demo's test)
        if self.server is None:
            from tests.support.airflow_server import running_airflow

            self.context = running_airflow()
            self.server = self.context.__enter__()
        return self.server

    def stop(self) -> None:
        if self.context is not None:
            context, self.context, self.server = self.context, None, None
            context.__exit__(None, None, None)


_AIRFLOW = _RunningAirflow()


@pytest.fixture
def airflow_server():
    """The running Airflow (api-server, scheduler, worker) with the tests' DAG bundles,
    started if it is not running (see tests/support/airflow_server.py and `_RunningAirflow`)."""
    return _AIRFLOW.get()


# Modules that run in the `airflow` lane only to even out the two lanes' time (the Airflow
# tests mostly wait; these are Spark's work). Measured on the 2-core CI machine: 1,481 s for
# this lane beside 1,379 s for `shared` (2026-11-28, with test_delta_merge_pipeline.py here
# too); on a day it ran ~3x slower, ~4,600 s beside ~3,700 s (2026-11-29), so that module,
# ~300 s of it, went back to `shared`.
BESIDE_AIRFLOW = ("test_delta_merge.py",)


def lane(item) -> str:
    """The lane of scripts/test_lanes.py a test runs in: `exclusive` for a test marked so,
    `airflow` for one that uses Airflow's metadata database (a running Airflow, or
    `dag.test()` on the same SQLite file: the Airflow modules and the demo's) and for the
    modules of BESIDE_AIRFLOW, else `shared`."""
    if item.get_closest_marker("exclusive"):
        return "exclusive"
    path = Path(str(item.path))
    if (
        "airflow_server" in getattr(item, "fixturenames", ())
        or path.parent.name == "e2e"
        or path.name.startswith("test_airflow")
        or path.name in BESIDE_AIRFLOW
    ):
        return "airflow"
    return "shared"


def pytest_collection_modifyitems(session, config, items) -> None:
    """Only the lane's tests when scripts/test_lanes.py names one; then the tests that need
    a running Airflow first, in their order, the end-to-end ones last of them (the demo's
    test ends with `make down`), then the rest."""
    wanted = os.environ.get("TIDEMARK_TEST_LANE")
    if wanted:
        lanes = {item.nodeid: lane(item) for item in items}
        config.hook.pytest_deselected(items=[item for item in items if lanes[item.nodeid] != wanted])
        items[:] = [item for item in items if lanes[item.nodeid] == wanted]

    def group(item) -> int:
        if "airflow_server" not in getattr(item, "fixturenames", ()):
            return 2
        return 1 if "/e2e/" in str(item.path) else 0

    items.sort(key=group)


def pytest_runtest_setup(item) -> None:
    if "airflow_server" not in getattr(item, "fixturenames", ()):
        _AIRFLOW.stop()


def pytest_sessionfinish(session, exitstatus) -> None:
    _AIRFLOW.stop()


# The VTGate test double (fixture `vitess`) and the MongoDB test server (fixture `mongodb`).
pytest_plugins = ["pytester", "tests.support.vtgate.fixture", "tests.support.mongo.fixture"]


# py4j logs "closing connection" from __del__ at interpreter exit, after pytest has
# closed its capture streams; that is noise, not a failure.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session with Delta for the whole test run (JVM start-up is slow)."""
    from spark_jobs.session import build_session

    session = build_session("tidemark-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[str]:
    """A Spark Connect server (the `spark-connect` service) for the whole test run; its URL.
    Left running when it was up before the run."""
    from scripts.services.spark_connect import SparkConnect

    server = SparkConnect()
    started = server.start()
    yield server.url
    if started:
        server.stop()
