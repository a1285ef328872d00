"""A Spark Connect server (`spark_jobs.connect_server`) as a local service, so chunk jobs
can attach to a Spark that is already up (`--remote sc://127.0.0.1:PORT`)."""

from __future__ import annotations

import subprocess
import sys

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.processes import _port_open
from scripts.services.settings import PORTS, ROOT


class SparkConnect(Service):
    name = "spark-connect"
    start_timeout = 180.0  # a driver JVM with Delta on a slow two-core machine

    def command(self) -> list[str]:
        return [sys.executable, "-m", "spark_jobs.connect_server", "--port", str(PORTS.spark_connect)]

    def conflicting_port(self) -> int | None:
        return PORTS.spark_connect if _port_open(PORTS.spark_connect) else None

    def ready(self) -> bool:
        return _port_open(PORTS.spark_connect)

    def start(self) -> bool:
        """Started here, the server runs one small job before it is handed over
        (`spark_jobs.connect_server.warm_up`), so that the first snapshot does not wait
        for it; a server that was already up is left as it is."""
        started = super().start()
        if started:
            failure = self.warm_up()
            if failure:  # a server that cannot run Python tasks cannot run a chunk job
                self.stop()
                raise ServiceError(f"{self.name}: the warm-up job failed, the server is stopped: {failure}")
        return started

    def warm_up(self) -> str | None:
        """The warm-up job, in a process of its own (one that has opened a Spark Connect
        session cannot open a Spark of its own afterwards, and the caller may want one);
        what went wrong, or None."""
        command = [sys.executable, "-m", "spark_jobs.connect_server", "--warm-up", self.url]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=self.start_timeout, cwd=ROOT
            )
        except subprocess.TimeoutExpired:
            return f"no answer within {self.start_timeout:.0f}s"
        if done.returncode != 0:
            return f"exit code {done.returncode}: {done.stderr.strip()[-2000:]}"
        return None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{PORTS.spark_connect}"

    def describe(self) -> str:
        return self.url
