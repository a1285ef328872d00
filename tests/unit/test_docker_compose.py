"""docker-compose.yml is a valid Compose file describing the production-like stack.

No Docker engine runs on the development machines, so the file is validated against the
Compose Specification's JSON schema, taken (pinned) from the compose-go module through
the Go module proxy; where the Compose plugin exists, `docker compose config` checks it too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_GO = "github.com/compose-spec/compose-go/v2@v2.16.2"
SERVICES = {
    "mysql", "kafka", "mongodb", "oracle", "vitess", "spark-master", "spark-worker", "postgres",
    "airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
    "minio", "minio-init",
}  # fmt: skip


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def compose_schema() -> dict:
    go = shutil.which("go")
    assert go, "Go is needed to fetch the Compose Specification schema (it is part of this machine kind)"
    env = {
        **os.environ,
        "GOMODCACHE": str(ROOT / ".local" / "gomodcache"),
        "GOFLAGS": "-modcacherw",
        "GO111MODULE": "on",
    }
    out = subprocess.run(
        [go, "mod", "download", "-json", COMPOSE_GO], capture_output=True, text=True, env=env, cwd=ROOT / ".local"
        if (ROOT / ".local").is_dir() else ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    directory = Path(json.loads(out.stdout)["Dir"])
    return json.loads((directory / "schema" / "compose-spec.json").read_text())


def test_file_follows_the_compose_specification(compose, compose_schema):
    jsonschema.Draft202012Validator(compose_schema).validate(compose)


def test_it_describes_the_whole_stack(compose):
    assert set(compose["services"]) == SERVICES


def test_ports_bind_to_loopback_only_and_images_are_pinned(compose):
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name} image {image} is not pinned"


def test_dependencies_volumes_and_mounts_exist(compose):
    services = compose["services"]
    declared = set(compose.get("volumes", {}))
    for name, service in services.items():
        for dependency in service.get("depends_on", {}) or {}:
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"


def test_secrets_come_from_the_environment(compose):
    text = (ROOT / "docker-compose.yml").read_text()
    for variable in ("MYSQL_ROOT_PASSWORD", "ORACLE_PASSWORD", "POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD"):
        assert f"${{{variable}:-" in text


def test_docker_compose_config_where_the_plugin_exists():
    docker = shutil.which("docker")
    has_plugin = (
        docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    )
    if has_plugin:
        result = subprocess.run([docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "-q"])
        assert result.returncode == 0


def test_the_connector_files_for_the_stacks_servers_are_valid():
    """docker/connectors/: connector files for the compose stack's real servers, validated
    as the streamer validates them (each names a port the compose file publishes)."""
    from cdc_core.config.connector_config import load_config

    files = sorted((ROOT / "docker" / "connectors").glob("*.yaml"))
    assert files
    published = yaml.safe_dump(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))
    for path in files:
        config = load_config(path, environ={})
        uri = config.values.get("mongodb.connection.string")  # MongoDB's address is its URI's
        address = uri.split("//")[1].split("/")[0] if uri else f"127.0.0.1:{config.get('database.port')}"
        assert address in published, path.name
