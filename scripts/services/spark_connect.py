"""A Spark Connect server (`spark_jobs.connect_server`) as a local service, so chunk jobs
can attach to a Spark that is already up (`--remote sc://127.0.0.1:PORT`)."""

from __future__ import annotations

import sys

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.processes import _port_open
from scripts.services.settings import PORTS


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
        (`spark_jobs.connect_server.warm_up`), so that the first snapshot does not wait for
        it; a server that was already up is left as it is."""
        started = super().start()
        if started:
            from spark_jobs.connect_server import warm_up

            try:
                warm_up(self.url)
            except Exception as exc:  # a server that cannot run Python tasks cannot run a chunk job
                self.stop()
                raise ServiceError(
                    f"{self.name}: the warm-up job failed, the server is stopped: {exc}"
                ) from exc
        return started

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{PORTS.spark_connect}"

    def describe(self) -> str:
        return self.url
