"""Processes and ports seen from outside: which binary to run, whether a port is taken,
whether a process lives, a process tree and how to end it, the end of a log."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from pathlib import Path

from scripts.services.errors import ServiceError


def _which(name: str, *extra_dirs: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        candidate = Path(d) / name
        if candidate.exists():
            return str(candidate)
    raise ServiceError(f"'{name}' is not installed: run `make install` (scripts/install_system.sh)")


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped) is not alive for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return True


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (no dependency: `make down` may run without
    the project's virtualenv)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` (not `pid` itself)."""
    return _descendants_of_any({pid})


def _descendants_of_any(pids: set[int]) -> set[int]:
    children = _children()
    found: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _end_processes(pids: set[int], grace: float) -> None:
    """SIGTERM the live ones, wait up to `grace` seconds, SIGKILL what is left, and
    return once none lives (a process is seen through its start time, so a pid reused
    by a new process is left alone)."""
    started = {pid: _start_time(pid) for pid in pids}
    alive = lambda pid: _pid_alive(pid) and _start_time(pid) == started[pid]  # noqa: E731
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        living = [pid for pid in pids if alive(pid)]
        for pid in living:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while living and time.monotonic() < deadline:
            living = [pid for pid in living if alive(pid)]
            time.sleep(0.1)
        if not living:
            return


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
