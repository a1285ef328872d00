"""What the demo prints while it waits: time-stamped steps, a snapshot progress line that
advances with the windows, and a JVM kept off the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cdc_core.cli import status_document
from cdc_core.config.connector_config import ConnectorConfig


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def step(text: str) -> None:
    print(f"{stamp()} ==> {text}", flush=True)


class SnapshotProgress:
    """The connector's snapshot as it advances (windows done/total and rows released, from
    its committed state) and the run's tasks: one time-stamped line per change; on a
    terminal the line is rewritten in place."""

    def __init__(self, config: ConnectorConfig, out: Any = None) -> None:
        self.config = config
        self.out = out or sys.stdout
        self.tty = self.out.isatty()
        self.tasks: dict[str, str | None] = {}
        self.last = ""

    def tasks_changed(self, tasks: dict[str, str | None]) -> None:
        self.tasks = tasks
        self.poll()

    def poll(self) -> None:
        line = self.describe()
        if line == self.last:
            return
        self.last = line
        if self.tty:
            self.out.write(f"\r\x1b[2K{stamp()} {line}")
        else:
            self.out.write(f"{stamp()} {line}\n")
        self.out.flush()

    def done(self) -> None:
        if self.tty and self.last:
            self.out.write("\n")
            self.out.flush()

    def describe(self) -> str:
        running = [t for t in self.tasks.items() if t[1] in ("running", "deferred", "queued", "up_for_retry")]
        tasks = ", ".join(f"{task} {state}" for task, state in running) or "-"
        progress = status_document(self.config, check_source=False).get("snapshots") or {}
        # (a snapshot that finished between two polls is shown finished, not as still awaited)
        snapshots = progress.get("running") or progress.get("finished", [])[-1:]
        if not snapshots:
            return f"    snapshot: waiting for the streamer to take the signal · tasks: {tasks}"
        tables = snapshots[0]["tables"]
        done = sum(t["windows_done"] for t in tables)
        total = sum(t["windows_total"] or 0 for t in tables)
        rows = sum(t["rows_released"] for t in tables)
        finished = sum(1 for t in tables if t["done"])
        return (
            f"    snapshot: {done}/{total or '?'} windows, {rows:,} rows released, "
            f"{finished}/{len(tables)} tables done · tasks: {tasks}"
        )


@contextlib.contextmanager
def process_output_to(path: Path) -> Iterator[None]:
    """Inside the block, this process's stdout and stderr (file descriptors 1 and 2) go to
    `path`: a JVM started here (Spark) inherits them and logs there for its whole life,
    while Python's own prints go back to the terminal after the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
