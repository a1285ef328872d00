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
output is kept in a file and printed when it ends. At the very end, each failed lane's
failures are printed again, cut short (CI shows a run's tail, and the `airflow` lane's
failures would otherwise sit in its middle). The exit code is pytest's: 0 when every
lane passed (a lane with nothing selected, pytest's 5, is fine while another ran tests),
5 when no lane collected a test, else the first failing lane's code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
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


_SECTION = re.compile(r"^=+ (.+?) =+$", re.MULTILINE)
_FAILURE = re.compile(r"^_+ (.+?) _+$", re.MULTILINE)  # one `_` a side when the name is long
_CAPTURED = re.compile(r"^-+ Captured .+ -+$", re.MULTILINE)


def _tail(text: str, limit: int) -> str:
    return "[...]\n" + text[-limit:] if len(text) > limit else text


def failure_digest(output: str, per_failure: int = 3000) -> str:
    """Each failure of a pytest run's output (its heading, the last `per_failure`
    characters of its traceback, where the assertion is, and less of what it printed) and
    the short summary's FAILED and ERROR lines; empty when the output has no failure."""
    sections = {m[1]: m for m in _SECTION.finditer(output)}
    parts: list[str] = []
    for name in ("FAILURES", "ERRORS"):
        if name not in sections:
            continue
        begin = sections[name].end()
        following = [m.start() for m in _SECTION.finditer(output, begin)]
        body = output[begin : following[0] if following else len(output)]
        heads = list(_FAILURE.finditer(body))
        ends = [head.start() for head in heads[1:]] + [len(body)]
        for head, end in zip(heads, ends, strict=True):
            report = body[head.end() : end].strip("\n")
            captured = _CAPTURED.search(report)
            traceback, output_seen = (
                (report[: captured.start()], report[captured.start() :]) if captured else (report, "")
            )
            parts.append(
                f"--- {head[1]}\n{_tail(traceback, per_failure)}\n{_tail(output_seen, per_failure // 3)}"
            )
    parts += [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return "\n".join(parts)


def _tee(process: subprocess.Popen, log) -> threading.Thread:
    """The lane's output to the terminal as it comes, and to its log."""

    def copy() -> None:
        for line in iter(process.stdout.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            log.write(line)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


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
    logs = {lane: LOGS / f"{lane}.log" for lane in ("airflow", "shared", "exclusive")}
    began = time.monotonic()
    codes: dict[str, int] = {}
    with open(logs["airflow"], "wb") as log:
        _banner(f"lanes `airflow` (output in {logs['airflow'].relative_to(ROOT)}) and `shared`, side by side")
        background = _pytest("airflow", args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            codes["shared"] = _in_view("shared", args, logs["shared"])
            codes["airflow"] = background.wait()
        finally:
            _stop(background)
    _banner(f"lane `airflow` (it ended {time.monotonic() - began:.0f} s after the start)")
    print(logs["airflow"].read_text(errors="replace"), flush=True)
    _banner("lane `exclusive`: tests that stop a service or change a server-wide setting, alone")
    codes["exclusive"] = _in_view("exclusive", args, logs["exclusive"])
    for lane, code in codes.items():
        if code in (0, NOTHING_COLLECTED):
            continue
        digest = failure_digest(logs[lane].read_text(errors="replace"))
        if digest:
            _banner(f"lane `{lane}` failed (exit {code}): its failures again, cut short")
            print(digest, flush=True)
    code = combined(codes)
    summary = ", ".join(f"{lane} {rc}" for lane, rc in codes.items())
    print(f"test lanes: exit codes {summary}; {time.monotonic() - began:.0f} s in all", flush=True)
    return code


def _in_view(lane: str, args: list[str], log_path: Path) -> int:
    """A lane run in the foreground: printed as it goes and kept in its log."""
    with open(log_path, "wb") as log:
        process = _pytest(lane, args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        copier = _tee(process, log)
        code = process.wait()
        copier.join()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
