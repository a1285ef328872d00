"""The local Airflow: its migrated metadata database (`airflow-db`) and `airflow
standalone` (`airflow`), with the development login."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.settings import AIRFLOW_PASSWORD_ENV, AIRFLOW_USER, LOCAL, PORTS, VENV_BIN, environment


def _airflow_bin() -> str:
    path = VENV_BIN / "airflow"
    if not path.exists():
        raise ServiceError("airflow is not installed in .venv; run `make install`")
    return str(path)


class AirflowDB(Service):
    """Airflow's SQLite metadata database, migrated to the installed Airflow's schema."""

    name = "airflow-db"

    @property
    def home(self) -> Path:
        return LOCAL / "airflow"

    @property
    def stamp(self) -> Path:
        return self.home / ".migrated"

    def _want(self) -> str:
        import importlib.metadata

        try:
            return importlib.metadata.version("apache-airflow-core")
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def running(self) -> bool:
        return (
            self.stamp.exists()
            and self.stamp.read_text() == self._want()
            and (self.home / "airflow.db").exists()
        )

    def start(self) -> bool:
        if self.running():
            return False
        self.home.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            [_airflow_bin(), "db", "migrate"],
            env={**os.environ, **environment()},
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise ServiceError(f"airflow db migrate failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        self.stamp.write_text(self._want())
        return False  # nothing to stop afterwards

    def stop(self, timeout: float = 60.0) -> bool:
        return False

    def describe(self) -> str:
        return str(self.home / "airflow.db")


class Airflow(Service):
    """``airflow standalone`` (api-server, scheduler, dag-processor, triggerer).

    `extra` is environment on top of the stack's (the tests add their DAG bundle and a
    connectors folder of their own). It is recorded next to the pid file: asking for
    extras from an Airflow already running without the same ones is an error, since its
    processes cannot be changed from outside."""

    name = "airflow"
    start_timeout = 180.0

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.extra = dict(extra or {})

    @property
    def home(self) -> Path:
        return LOCAL / "airflow"

    @property
    def extra_file(self) -> Path:
        return self.home / "run" / "airflow.extra-env.json"

    def conflicting_port(self) -> int | None:
        return PORTS.airflow

    def extra_env(self) -> dict[str, str]:
        return self.extra

    def start(self) -> bool:
        if self.extra and self.running():
            try:
                running_with = json.loads(self.extra_file.read_text())
            except (OSError, ValueError):
                running_with = {}
            if running_with != self.extra:
                raise ServiceError(
                    f"airflow is already running with another configuration ({self.extra_file}); stop it "
                    "with `python -m scripts.services down airflow` and start again"
                )
        started = super().start()
        if started:
            self.extra_file.write_text(json.dumps(self.extra, sort_keys=True))
        return started

    def stop(self, timeout: float = 60.0) -> bool:
        stopped = super().stop(timeout)
        self.extra_file.unlink(missing_ok=True)
        return stopped

    def prepare(self) -> None:
        AirflowDB().start()
        # The login's password: SimpleAuthManager keeps a user's password once the file
        # names the user, so the development password is written before each start.
        env = environment()
        passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
        passwords.write_text(json.dumps({AIRFLOW_USER: env[AIRFLOW_PASSWORD_ENV]}) + "\n")
        passwords.chmod(0o600)

    def command(self) -> list[str]:
        return [_airflow_bin(), "standalone"]

    def ready(self) -> bool:
        url = f"http://127.0.0.1:{PORTS.airflow}/api/v2/monitor/health"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                body = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return body.get("metadatabase", {}).get("status") == "healthy"

    def describe(self) -> str:
        return f"http://127.0.0.1:{PORTS.airflow}"
