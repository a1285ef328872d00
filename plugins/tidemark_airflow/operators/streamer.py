"""Run a connector's streamer as a supervised child process for a bounded time.

Each DAG run supervises the streamer for its slot and the next run takes over from the
committed offsets, so a worker restart costs at most one slot of latency and never a
duplicate or a gap: the streamer resumes exactly after the last acknowledged event. A
streamer that dies (crash, kill -9, OOM) is restarted from its offsets up to `restarts`
times; then the task fails and alerts. The connector's lease stops a second streamer:
if another one holds it, the task fails at once and says which process holds it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from cdc_core.cli import LEASE_HELD
from tidemark_airflow.hooks.source import TidemarkSourceHook


class StreamerLeaseHeld(AirflowException):
    """Another streamer runs for this connector; starting a second one would duplicate."""


class StreamerOperator(BaseOperator):
    template_fields: Sequence[str] = ("connector",)

    def __init__(
        self,
        *,
        connector: str,
        run_seconds: float,
        restarts: int = 3,
        restart_delay_seconds: float = 2.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector, self.run_seconds = connector, run_seconds
        self.restarts, self.restart_delay_seconds = restarts, restart_delay_seconds
        self._proc: subprocess.Popen[bytes] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        hook = TidemarkSourceHook(self.connector)
        config_file = hook.config_file()
        env = {**os.environ, **hook.child_env()}
        deadline = time.monotonic() + self.run_seconds
        crashes: list[int] = []
        while True:
            remaining = max(1.0, deadline - time.monotonic())
            code = self._run_once(config_file, env, remaining)
            if code == 0:
                break
            if code == LEASE_HELD:
                raise StreamerLeaseHeld(
                    f"connector {self.connector}: another streamer holds the lease; not starting a second one"
                )
            crashes.append(code)
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            if len(crashes) > self.restarts:
                raise AirflowException(
                    f"connector {self.connector}: the streamer {how}; {len(crashes)} failures in this run "
                    f"(restarts allowed: {self.restarts})"
                )
            if time.monotonic() >= deadline:
                break
            self.log.warning(
                "connector %s: the streamer %s; restarting from the committed offsets (restart %d of %d)",
                self.connector,
                how,
                len(crashes),
                self.restarts,
            )
            time.sleep(self.restart_delay_seconds)
        return {"connector": self.connector, "restarts": len(crashes), "exit_codes": crashes}

    def _run_once(self, config_file: str, env: dict[str, str], seconds: float) -> int:
        cmd = [
            sys.executable,
            "-m",
            "cdc_core.cli",
            "stream",
            "--config",
            config_file,
            "--max-seconds",
            f"{seconds:.0f}",
            "--status-line",
            "never",
        ]
        self.log.info("starting: %s", " ".join(cmd))
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        relay = threading.Thread(target=self._relay, args=(self._proc,), daemon=True)
        relay.start()
        code = self._proc.wait()
        relay.join(5)
        return code

    def _relay(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.log.info("streamer: %s", line.decode(errors="replace").rstrip())

    def on_kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
