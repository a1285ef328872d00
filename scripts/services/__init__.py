"""Start, stop and check Tidemark's local services (MariaDB, the Vitess shard servers and
the VTGate double, Kafka, Spark Connect, the MongoDB test server, Airflow's metadata
database, Airflow); the CLI and its usage text are in `cli` (`python -m scripts.services`).

One module a job: `settings` (folders, ports, credentials, `environment()`), `processes`
(process and port helpers), `base` (`Service`), `errors` (`ServiceError`), a module a
service (`mariadb`, `vitess`, `kafka`, `spark_connect`, `mongodb`, `airflow`) and `cli`
(the `SERVICES` registry and the verbs). Every name other code uses is importable from here, as before the split.
"""

from scripts.services.airflow import Airflow, AirflowDB, _airflow_bin
from scripts.services.base import Service
from scripts.services.cli import DEFAULT_UP, SERVICES, _select, default_up, down, main, run, status, up
from scripts.services.errors import ServiceError
from scripts.services.kafka import Kafka
from scripts.services.mariadb import MariaDB, _current_user, _sql_string_body
from scripts.services.mongodb import MongoDB, mongodb_connector_files
from scripts.services.processes import (
    _children,
    _descendants,
    _descendants_of_any,
    _end_processes,
    _pid_alive,
    _port_open,
    _start_time,
    _tail,
    _which,
)
from scripts.services.settings import (
    ADMIN_PASSWORD_DEFAULT,
    ADMIN_PASSWORD_ENV,
    ADMIN_USER,
    AIRFLOW_PASSWORD_DEFAULT,
    AIRFLOW_PASSWORD_ENV,
    AIRFLOW_USER,
    CDC_PASSWORD_DEFAULT,
    CDC_PASSWORD_ENV,
    CDC_USER,
    CONTROL_DB,
    DEMO_SOURCE_CONN_ENV,
    DEMO_VITESS_CONN_ENV,
    JARS,
    LOCAL,
    PORTS,
    ROOT,
    SIGNAL_TABLE,
    VENV_BIN,
    Ports,
    admin_connection,
    environment,
)
from scripts.services.vitess import VitessShard, VitessShards, VTGateDouble

__all__ = [
    "ADMIN_PASSWORD_DEFAULT",
    "ADMIN_PASSWORD_ENV",
    "ADMIN_USER",
    "AIRFLOW_PASSWORD_DEFAULT",
    "AIRFLOW_PASSWORD_ENV",
    "AIRFLOW_USER",
    "CDC_PASSWORD_DEFAULT",
    "CDC_PASSWORD_ENV",
    "CDC_USER",
    "CONTROL_DB",
    "DEFAULT_UP",
    "DEMO_SOURCE_CONN_ENV",
    "DEMO_VITESS_CONN_ENV",
    "JARS",
    "LOCAL",
    "PORTS",
    "ROOT",
    "SERVICES",
    "SIGNAL_TABLE",
    "VENV_BIN",
    "Airflow",
    "AirflowDB",
    "Kafka",
    "MariaDB",
    "MongoDB",
    "Ports",
    "Service",
    "ServiceError",
    "VTGateDouble",
    "VitessShard",
    "VitessShards",
    "_airflow_bin",
    "_children",
    "_current_user",
    "_descendants",
    "_descendants_of_any",
    "_end_processes",
    "_pid_alive",
    "_port_open",
    "_select",
    "_sql_string_body",
    "_start_time",
    "_tail",
    "_which",
    "admin_connection",
    "default_up",
    "down",
    "environment",
    "main",
    "mongodb_connector_files",
    "run",
    "status",
    "up",
]
