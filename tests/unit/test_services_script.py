"""The services script's failure paths on a fresh machine: the Kafka cluster id that
begins with "-" (one time in 64), and a service that fails to start after others did."""

from __future__ import annotations

import subprocess
import uuid

from scripts import services
from scripts.services import cli


def test_a_cluster_id_beginning_with_a_dash_is_passed_as_the_value_of_its_option(tmp_path, monkeypatch):
    """Given as a separate argument, such an id was read as an option and formatting
    failed (`make test` on a fresh clone stopped at it once)."""
    monkeypatch.setattr(services.Kafka, "home", property(lambda self: tmp_path))
    monkeypatch.setattr(services.Kafka, "_java", lambda self: ["java"])
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(bytes=bytes([0xF8]) + bytes(15)))
    ran: list[list[str]] = []
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda command, **kwargs: ran.append(command) or subprocess.CompletedProcess(command, 0),
    )
    services.Kafka().prepare()
    [command] = ran
    [given] = [a for a in command if "cluster-id" in a]
    assert given == "--cluster-id=-AAAAAAAAAAAAAAAAAAAAA"


def test_services_started_before_one_that_fails_are_stopped_again(monkeypatch, capsys):
    """`make test` runs its command between `services run`'s start and stop: a service
    that failed to start (Kafka above) left MariaDB running, whose port then failed the
    next run."""
    events: list[str] = []

    class Fake:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        def start(self) -> bool:
            if self.fails:
                raise services.ServiceError(f"{self.name}: cannot start")
            events.append(f"start {self.name}")
            return True

        def stop(self) -> bool:
            events.append(f"stop {self.name}")
            return True

        def describe(self) -> str:
            return ""

    fakes = [Fake("mariadb"), Fake("kafka", fails=True)]
    # `run` and `up` live in scripts/services/cli.py and look `_select` up there.
    monkeypatch.setattr(cli, "_select", lambda names, default: fakes)
    monkeypatch.delenv("TIDEMARK_KEEP_SERVICES", raising=False)
    assert services.main(["run", "mariadb", "kafka", "--", "true"]) == 1
    assert events == ["start mariadb", "stop mariadb"]
    assert "kafka: cannot start" in capsys.readouterr().err


def _mongodb_file(folder, name: str, connector_class: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\nconnector.class: {connector_class}\ntopic.prefix: {name}\n"
    )


def test_up_without_names_starts_the_mongodb_test_server_for_a_mongodb_connector_file(
    tmp_path, monkeypatch, capsys
):
    """`make up` started MariaDB, Kafka and Airflow only; a MongoDB connector file needed
    the test server found in tests/support and started by hand."""
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(tmp_path / "connectors"))
    _mongodb_file(tmp_path / "connectors", "shop", "mysql")
    assert cli.default_up() == ["mariadb", "kafka", "airflow"]
    _mongodb_file(tmp_path / "connectors", "orders", "io.debezium.connector.mongodb.MongoDbConnector")
    (tmp_path / "connectors" / "broken.yaml").write_text("name: [")  # reported elsewhere, skipped here
    assert cli.default_up() == ["mariadb", "kafka", "mongodb", "airflow"]
    assert services.mongodb_connector_files() == [tmp_path / "connectors" / "orders.yaml"]

    started: list[str] = []
    monkeypatch.setattr(services.MongoDB, "start", lambda self: started.append(self.name) or True)
    monkeypatch.setattr(services.MongoDB, "running", lambda self: False)
    assert services.main(["up", "mongodb"]) == 0  # by name, as any service
    assert started == ["mongodb"]
    assert services.main(["status", "mongodb"]) == 1  # named and stopped
    assert capsys.readouterr().out.splitlines()[-1].split()[:2] == ["mongodb", "stopped"]


def test_the_mongodb_service_runs_the_test_servers_command_on_its_fixed_port():
    """One command for the service and the tests' servers (`tests/support/mongo/server.py`),
    on a port of its own (27117 unless TIDEMARK_MONGODB_PORT moves it)."""
    import os

    from scripts.services.mongodb import server_command
    from tests.support.mongo.server import MongoTestServer

    port = services.PORTS.mongodb
    assert port == int(os.environ.get("TIDEMARK_MONGODB_PORT", "27117"))
    ports = list(vars(services.PORTS).values())
    assert len(set(ports)) == len(ports)  # clear of every other service
    service = services.MongoDB()
    assert service.command()[-2:] == [str(port), "127.0.0.1"]
    assert service.uri == f"mongodb://127.0.0.1:{port}/?replicaSet=rs0"
    assert services.environment()["TIDEMARK_MONGODB_PORT"] == str(port)
    test_server = MongoTestServer.__new__(MongoTestServer)
    test_server.port, test_server.stock = 4242, False
    assert test_server.uri == "mongodb://127.0.0.1:4242/?replicaSet=rs0"
    assert server_command(4242, heap="2g", stock=True)[-3:] == ["4242", "127.0.0.1", "--stock"]
