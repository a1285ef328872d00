"""The Spark Connect server the chunk jobs attach to: Spark's own server class started by
spark-submit with the project's jars and an in-process session's settings, listening on
loopback only, its Python workers on this interpreter with the project importable."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from cdc_core.errors import TidemarkError
from spark_jobs import connect_server
from spark_jobs.classpath import PROJECT_ROOT
from spark_jobs.session import connect_address, remote_session


@pytest.fixture
def jars(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "delta-spark_2.13-4.4.0.jar").write_text("delta")
    (folder / "mariadb-java-client-3.5.jar").write_text("jdbc")
    monkeypatch.setenv("TIDEMARK_SPARK_JARS_DIR", str(folder))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "pyspark"))
    return folder


def settings(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, part in enumerate(command) if part == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_server_is_sparks_own_class_with_the_projects_jars_and_delta(jars, tmp_path):
    command = connect_server.server_command(port=15123, master="local[3]")
    assert command[0] == str(tmp_path / "pyspark" / "bin" / "spark-submit")
    assert command[command.index("--class") + 1] == connect_server.SERVER_CLASS
    assert command[command.index("--master") + 1] == "local[3]"
    assert command[command.index("--jars") + 1].split(",") == sorted(str(p) for p in jars.glob("*.jar"))
    assert command[-1] == "spark-internal"
    conf = settings(command)
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "-Duser.timezone=UTC" in conf["spark.driver.extraJavaOptions"]


def test_the_server_listens_on_loopback_at_the_port_asked_for(jars):
    conf = settings(connect_server.server_command(port=15123))
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15123"


def test_its_python_workers_run_this_interpreter_with_the_project_importable(monkeypatch, jars):
    monkeypatch.setenv("PYTHONPATH", "/opt/extra")
    env = connect_server.server_env()
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert env["PYTHONPATH"].split(":") == [str(PROJECT_ROOT), "/opt/extra"]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("sc://127.0.0.1:15123", ("127.0.0.1", 15123)),
        ("sc://spark.internal/;token=abc;use_ssl=true", ("spark.internal", 15002)),
        ("sc://[::1]:16000/;user_id=etl", ("::1", 16000)),
    ],
)
def test_a_connect_url_gives_its_host_and_port(url, address):
    assert connect_address(url) == address


def test_a_url_that_is_not_spark_connects_is_refused():
    with pytest.raises(TidemarkError, match="sc://HOST:PORT"):
        connect_address("http://127.0.0.1:15002")


def test_no_server_at_the_address_fails_at_once_naming_it_but_not_the_token():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: refused
        began = time.monotonic()
        with pytest.raises(TidemarkError) as refused:
            remote_session(f"sc://127.0.0.1:{port}/;token=s3cr3t")
    assert time.monotonic() - began < 10
    assert f"no Spark Connect server at 127.0.0.1:{port}" in str(refused.value)
    assert "s3cr3t" not in str(refused.value)


@pytest.mark.parametrize("started", [True, False])
def test_the_service_warms_up_a_server_it_started_and_leaves_a_running_one_alone(monkeypatch, started):
    from scripts.services import base
    from scripts.services.spark_connect import SparkConnect

    warmed = []
    monkeypatch.setattr(base.Service, "start", lambda self: started)
    monkeypatch.setattr(SparkConnect, "warm_up", lambda self: warmed.append(self.url))
    service = SparkConnect()
    assert service.start() is started
    assert warmed == ([service.url] if started else [])


def test_a_server_whose_warm_up_fails_is_stopped_and_the_start_fails_saying_why(monkeypatch):
    from scripts.services import base
    from scripts.services.errors import ServiceError
    from scripts.services.spark_connect import SparkConnect

    stopped = []
    monkeypatch.setattr(base.Service, "start", lambda self: True)
    monkeypatch.setattr(base.Service, "stop", lambda self, timeout=60.0: stopped.append(True) or True)
    monkeypatch.setattr(
        SparkConnect, "warm_up", lambda self: "exit code 1: Python worker exited unexpectedly"
    )
    with pytest.raises(
        ServiceError, match="warm-up job failed, the server is stopped: exit code 1: Python worker"
    ):
        SparkConnect().start()
    assert stopped == [True]
