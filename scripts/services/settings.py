"""Where the local stack lives and how it is reached: its folders, ports and development
credentials, and the environment every tool of the stack reads."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

# scripts/services/settings.py: the repository is three folders up.
ROOT = Path(__file__).resolve().parent.parent.parent
LOCAL = ROOT / ".local"
JARS = ROOT / ".jars"
VENV_BIN = ROOT / ".venv" / "bin"


@dataclass(frozen=True)
class Ports:
    mariadb: int = int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307"))
    kafka: int = int(os.environ.get("TIDEMARK_KAFKA_PORT", "9092"))
    kafka_controller: int = int(os.environ.get("TIDEMARK_KAFKA_CONTROLLER_PORT", "9093"))
    airflow: int = int(os.environ.get("TIDEMARK_AIRFLOW_PORT", "8080"))
    # The VTGate test double's shard servers: this port and the three after it.
    vitess_shards: int = int(os.environ.get("TIDEMARK_VITESS_SHARD_PORT", "3311"))
    # The VTGate double run as a service (the Vitess demo): VStream over gRPC, MySQL protocol.
    vtgate_grpc: int = int(os.environ.get("TIDEMARK_VTGATE_GRPC_PORT", "15991"))
    vtgate_mysql: int = int(os.environ.get("TIDEMARK_VTGATE_MYSQL_PORT", "15306"))
    # The Spark Connect server that chunk jobs attach to (`--remote`).
    spark_connect: int = int(os.environ.get("TIDEMARK_SPARK_CONNECT_PORT", "15002"))
    # The MongoDB test server run as a service (a MongoDB connector file in connectors/);
    # not 27017, a real MongoDB's port (the Docker stack's `mongodb`).
    mongodb: int = int(os.environ.get("TIDEMARK_MONGODB_PORT", "27117"))


PORTS = Ports()

# Development credentials of the local stack only. Production credentials come from
# Airflow connections or environment variables (see README, "Configuration").
CDC_USER = "tidemark"
CDC_PASSWORD_ENV = "TIDEMARK_DB_PASSWORD"
CDC_PASSWORD_DEFAULT = "tidemark-dev"
ADMIN_USER = "tidemark_admin"  # creates schemas and workloads in tests and the demo
ADMIN_PASSWORD_ENV = "TIDEMARK_ADMIN_PASSWORD"
ADMIN_PASSWORD_DEFAULT = "tidemark-admin-dev"
CONTROL_DB = "tidemark"
# The demo connector's Airflow connection (airflow.conn.id tidemark_demo_mariadb).
DEMO_SOURCE_CONN_ENV = "AIRFLOW_CONN_TIDEMARK_DEMO_MARIADB"
DEMO_VITESS_CONN_ENV = "AIRFLOW_CONN_TIDEMARK_DEMO_VITESS"  # connectors/demo_vitess.yaml's
# The local Airflow's UI and REST API login (SimpleAuthManager, one admin user).
AIRFLOW_USER = "admin"
AIRFLOW_PASSWORD_ENV = "TIDEMARK_AIRFLOW_PASSWORD"
AIRFLOW_PASSWORD_DEFAULT = "tidemark-airflow-dev"
SIGNAL_TABLE = "debezium_signal"


def environment() -> dict[str, str]:
    """The variables every tool of the local stack (tests, Airflow, Spark jobs) reads."""
    airflow_home = LOCAL / "airflow"
    return {
        "TIDEMARK_ROOT": str(ROOT),
        "TIDEMARK_MARIADB_HOST": "127.0.0.1",
        "TIDEMARK_MARIADB_PORT": str(PORTS.mariadb),
        "TIDEMARK_MARIADB_SOCKET": str(LOCAL / "mariadb" / "run" / "mariadbd.sock"),
        "TIDEMARK_DB_USER": CDC_USER,
        CDC_PASSWORD_ENV: os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
        "TIDEMARK_ADMIN_USER": ADMIN_USER,
        ADMIN_PASSWORD_ENV: os.environ.get(ADMIN_PASSWORD_ENV, ADMIN_PASSWORD_DEFAULT),
        "PATH": os.pathsep.join((str(VENV_BIN), os.environ.get("PATH", ""))),
        "TIDEMARK_KAFKA_BOOTSTRAP": f"127.0.0.1:{PORTS.kafka}",
        "TIDEMARK_VITESS_SHARD_PORT": str(PORTS.vitess_shards),
        "TIDEMARK_SPARK_JARS_DIR": str(JARS / "spark"),
        "TIDEMARK_AIRFLOW_URL": f"http://127.0.0.1:{PORTS.airflow}",
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # A 2-core development machine: a few LocalExecutor workers, not Airflow's 32.
        "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "4"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{PORTS.airflow}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(PORTS.airflow),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(airflow_home / "logs"),
        # Login of the UI and the REST API: a fixed development password (written to the
        # passwords file by `Airflow.prepare`) instead of one generated and printed.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(airflow_home / "passwords.json"),
        "TIDEMARK_AIRFLOW_USER": AIRFLOW_USER,
        AIRFLOW_PASSWORD_ENV: os.environ.get(AIRFLOW_PASSWORD_ENV, AIRFLOW_PASSWORD_DEFAULT),
        # Airflow connections of the local stack: the demo connector's source (its
        # password is masked in task logs) and Spark in local mode for the jobs.
        DEMO_SOURCE_CONN_ENV: json.dumps(
            {
                "conn_type": "mysql",
                "host": "127.0.0.1",
                "port": PORTS.mariadb,
                "login": CDC_USER,
                "password": os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
            }
        ),
        DEMO_VITESS_CONN_ENV: json.dumps(
            {
                "conn_type": "generic",
                "host": "127.0.0.1",
                "port": PORTS.vtgate_grpc,
                "login": CDC_USER,
                "password": os.environ.get(CDC_PASSWORD_ENV, CDC_PASSWORD_DEFAULT),
            }
        ),
        "TIDEMARK_VTGATE_GRPC_PORT": str(PORTS.vtgate_grpc),
        "TIDEMARK_VTGATE_MYSQL_PORT": str(PORTS.vtgate_mysql),
        "TIDEMARK_SPARK_CONNECT_PORT": str(PORTS.spark_connect),
        "TIDEMARK_MONGODB_PORT": str(PORTS.mongodb),
        "AIRFLOW_CONN_TIDEMARK_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "TIDEMARK_CONNECTORS_DIR": os.environ.get("TIDEMARK_CONNECTORS_DIR", str(ROOT / "connectors")),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


def admin_connection(database: str | None = None):
    """A connection as the local stack's admin user (creates schemas and workloads)."""
    import pymysql

    env = environment()
    return pymysql.connect(
        host="127.0.0.1",
        port=PORTS.mariadb,
        user=ADMIN_USER,
        password=env[ADMIN_PASSWORD_ENV],
        database=database,
        autocommit=True,
        init_command="SET time_zone = '+00:00'",
    )
