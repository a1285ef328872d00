"""`make test` in lanes: the tests spend about half their time waiting (on Airflow's
scheduler, on a streamer's poll, on a JVM starting), so on a 2-core machine two pytest
processes side by side finish well before one alone.

    python -m scripts.test_lanes [PYTEST ARGS ...]

- `airflow`: the tests that use Airflow's metadata database (a running Airflow, or
  `dag.test()` on the same SQLite file), which one process at a time may use;
- `shared`: every other test, beside the `airflow` lane;
- `exclusive`: the tests marked `exclusive`, which stop a service or change a setting of
  the whole server (tests/conftest.py); they run alone, after both.

Each lane is one pytest process with `TIDEMARK_TEST_LANE` set; tests/conftest.py keeps
that lane's tests and deselects the rest, so a plain `pytest` (no lane) still runs
everything in one process. The `shared` lane prints as it goes; the `airflow` lane's
output is kept in a file and printed when it ends. The exit code is pytest's: 0 when every
lane passed (a lane with nothing selected, pytest's 5, is fine while another ran tests),
5 when no lane collected a test, else the first failing lane's code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / ".local" / "test-lanes"
NOTHING_COLLECTED = 5


def _pytest(lane: str, args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "TIDEMARK_TEST_LANE": lane}
    return subprocess.Popen([sys.executable, "-m", "pytest", *args], env=env, cwd=ROOT, **kwargs)


def _stop(process: subprocess.Popen) -> None:
    """The background lane and every process it started (Spark, streamers, Airflow)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _banner(text: str) -> None:
    print(f"\n{'=' * 30} {text} {'=' * 30}", flush=True)


def combined(codes: dict[str, int]) -> int:
    """One exit code for the lanes' codes (see the module's docstring)."""
    failed = [code for code in codes.values() if code not in (0, NOTHING_COLLECTED)]
    if failed:
        return failed[0]
    if all(code == NOTHING_COLLECTED for code in codes.values()):
        return NOTHING_COLLECTED
    return 0


def main(args: list[str]) -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / "airflow.log"
    began = time.monotonic()
    codes: dict[str, int] = {}
    with open(log_path, "w") as log:
        _banner(f"lanes `airflow` (output in {log_path.relative_to(ROOT)}) and `shared`, side by side")
        background = _pytest("airflow", args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            codes["shared"] = _pytest("shared", args).wait()
            codes["airflow"] = background.wait()
        finally:
            _stop(background)
    _banner(f"lane `airflow` (it ended {time.monotonic() - began:.0f} s after the start)")
    print(log_path.read_text(errors="replace"), flush=True)
    _banner("lane `exclusive`: tests that stop a service or change a server-wide setting, alone")
    codes["exclusive"] = _pytest("exclusive", args).wait()
    code = combined(codes)
    summary = ", ".join(f"{lane} {rc}" for lane, rc in codes.items())
    print(f"test lanes: exit codes {summary}; {time.monotonic() - began:.0f} s in all", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
