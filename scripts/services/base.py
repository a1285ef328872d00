"""What every local service shares: a daemon of ours with a pid file, a log file and a
readiness check, started idempotently and stopped with its whole process tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scripts.services.errors import ServiceError
from scripts.services.processes import (
    _descendants,
    _descendants_of_any,
    _end_processes,
    _pid_alive,
    _port_open,
    _tail,
)
from scripts.services.settings import LOCAL, environment


class Service:
    """A daemon we start ourselves: pid file, log file, readiness check."""

    name = ""
    start_timeout = 60.0

    @property
    def home(self) -> Path:
        return LOCAL / self.name

    @property
    def pid_file(self) -> Path:
        return self.home / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "log" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) else None

    def running(self) -> bool:
        return self.pid() is not None

    def ready(self) -> bool:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Create configuration and data folders (idempotent)."""

    def after_ready(self) -> None:
        """One-time setup that needs the running service (idempotent)."""

    def conflicting_port(self) -> int | None:
        return None

    def start(self) -> bool:
        """Start if not running; return True when this call started it."""
        if self.running():
            self.wait_ready()
            self.after_ready()
            return False
        port = self.conflicting_port()
        if port is not None and _port_open(port):
            raise ServiceError(
                f"{self.name}: port {port} on 127.0.0.1 is taken by another process; stop it or "
                f"choose another port (see `python -m scripts.services env`)"
            )
        self.prepare()
        for d in (self.pid_file.parent, self.log_file.parent):
            d.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **environment(), **self.extra_env()}
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                env=env,
                start_new_session=True,  # its own process group, so `down` stops all of it
            )
        self.pid_file.write_text(str(proc.pid))
        try:
            self.wait_ready(proc)
        except ServiceError:
            self.stop()
            raise
        self.after_ready()
        return True

    def extra_env(self) -> dict[str, str]:
        return {}

    def wait_ready(self, proc: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServiceError(
                    f"{self.name} exited with code {proc.returncode} while starting; "
                    f"last lines of {self.log_file}:\n{_tail(self.log_file)}"
                )
            if self.ready():
                return
            time.sleep(0.5)
        raise ServiceError(
            f"{self.name} did not become ready within {self.start_timeout:.0f}s; "
            f"last lines of {self.log_file}:\n{_tail(self.log_file)}"
        )

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the service and every process it started, and return only when all of
        them have exited; True when something was running. A service's processes may
        leave its process group (Airflow's task runners start sessions of their own, and
        the streamer's operator starts it in one), so its whole process tree is taken
        before the stop request, and what is left of it when the service has stopped gets
        SIGTERM, then SIGKILL."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        tree = _descendants(pid)
        self.request_stop(pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.2)
        if _pid_alive(pid):
            print(f"{self.name}: did not stop within {timeout:.0f}s, killing it", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # also ends helpers left in the group
        while _pid_alive(pid):
            time.sleep(0.1)
        _end_processes(tree | _descendants_of_any(tree), grace=min(timeout, 30.0))
        self.pid_file.unlink(missing_ok=True)
        return True

    def request_stop(self, pid: int) -> None:
        """Ask the service to shut down cleanly; `stop` waits and then kills what is left."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)

    def describe(self) -> str:
        return ""
