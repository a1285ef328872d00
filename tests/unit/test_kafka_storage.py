"""The Kafka service formats its storage with a random cluster id: a URL-safe base64 UUID,
which begins with "-" one time in 64. Given as a separate argument, such an id was read
as an option and formatting failed (`make test` on a fresh clone stopped at it once)."""

from __future__ import annotations

import subprocess
import uuid

from scripts import services


def test_a_cluster_id_beginning_with_a_dash_is_passed_as_the_value_of_its_option(tmp_path, monkeypatch):
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
