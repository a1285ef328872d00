"""The local Kafka broker (KRaft, single node) run from the Maven-fetched jars."""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.processes import _port_open, _which
from scripts.services.settings import JARS, PORTS


class Kafka(Service):
    """A single-node Apache Kafka broker in KRaft mode, run from the Maven-fetched jars."""

    name = "kafka"
    start_timeout = 90.0

    def conflicting_port(self) -> int | None:
        for port in (PORTS.kafka, PORTS.kafka_controller):
            if _port_open(port):
                return port
        return None

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"

    def _java(self) -> list[str]:
        jars = JARS / "kafka"
        if not any(jars.glob("kafka_*.jar")):
            raise ServiceError("kafka: broker jars missing in .jars/kafka; run `make install`")
        return [_which("java"), "-cp", f"{jars}/*"]

    def prepare(self) -> None:
        data = self.home / "data"
        (self.home / "log").mkdir(parents=True, exist_ok=True)
        self.properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{PORTS.kafka_controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{PORTS.kafka},"
                    f"CONTROLLER://127.0.0.1:{PORTS.kafka_controller}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{PORTS.kafka}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    "",
                ]
            )
        )
        (self.home / "log4j2.properties").write_text(
            "\n".join(
                [
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.out.ref = out",
                    "appender.out.type = Console",
                    "appender.out.name = out",
                    "appender.out.layout.type = PatternLayout",
                    "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                    "logger.kafka.name = kafka",
                    "logger.kafka.level = INFO",
                    "logger.state.name = state.change.logger",
                    "logger.state.level = WARN",
                    "",
                ]
            )
        )
        if not (data / "meta.properties").exists():
            data.mkdir(parents=True, exist_ok=True)
            # StorageTool wants the cluster id as a URL-safe base64 UUID, which begins with
            # "-" one time in 64: given as `--cluster-id=...`, it is never read as an option.
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            res = subprocess.run(
                self._java()
                + [
                    f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={cluster_id}",
                    "-c",
                    str(self.properties),
                ],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise ServiceError(f"kafka: formatting storage failed:\n{res.stdout}\n{res.stderr}")

    def command(self) -> list[str]:
        return self._java()[:1] + [
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'log'}",
            "-cp",
            f"{JARS / 'kafka'}/*",
            "kafka.Kafka",
            str(self.properties),
        ]

    def ready(self) -> bool:
        if not _port_open(PORTS.kafka):
            return False
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:  # bootstrap without the venv: the port is the best we have
            return True
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{PORTS.kafka}", "log_level": 0})
        try:
            meta = admin.list_topics(timeout=2)
        except Exception:
            return False
        return len(meta.brokers) == 1 and meta.controller_id >= 0

    def describe(self) -> str:
        return f"127.0.0.1:{PORTS.kafka} (KRaft controller 127.0.0.1:{PORTS.kafka_controller})"
