"""Whether the streamer that wrote a status file still runs.

The status file says `running` until the streamer writes something else, which a
`kill -9` (or a machine's crash) never lets it do; its live progress then describes
windows that no offset committed. So a reader of the file (`tidemark status`, the status
page, Airflow's health check) asks here first: on the streamer's own host, whether its
process lives (the pid, and the process's start time, so a pid taken again by another
process does not count); on another host, whether the file is fresh.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# A status file written elsewhere and older than this is a streamer that stopped writing.
STALE_SECONDS = 60.0


def process_identity() -> dict[str, Any]:
    """What a streamer writes into its status file so that it can be told apart later."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "pid_started": process_start(pid)}


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (`/proc/<pid>/stat`), None where
    there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count after it
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status_age(status: Mapping[str, Any], now: float | None = None) -> float | None:
    """Seconds since the status file was written, None when it does not say."""
    updated = status.get("updated_at")
    if not updated:
        return None
    stamp = datetime.strptime(str(updated), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return (time.time() if now is None else now) - stamp.timestamp()


def not_running_reason(
    status: Mapping[str, Any], now: float | None = None, stale_seconds: float = STALE_SECONDS
) -> str | None:
    """Why a status file that says `running` is not a running streamer, or None when it
    is one (or says something else, which is then true)."""
    if status.get("state") != "running":
        return None
    pid, host = status.get("pid"), status.get("host")
    if isinstance(pid, int) and (host is None or host == socket.gethostname()):
        if not _pid_alive(pid):
            return f"its process (pid {pid}) is gone: it was killed or crashed before it could say so"
        started = status.get("pid_started")
        if started is not None and process_start(pid) not in (None, started):
            return f"its process (pid {pid}) is gone: that pid belongs to another process now"
        return None
    age = status_age(status, now)
    if age is not None and age > stale_seconds:
        where = f" on {host}" if host else ""
        return f"its status{where} was last written {age:.0f}s ago (more than {stale_seconds:.0f}s)"
    return None


def with_liveness(status: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """The status file's document as a reader should take it: a `running` streamer that is
    not running becomes `dead`, with the reason as its `error`, and without its live
    progress (`snapshots`, `rate`, `lag_ms`), which no offset committed."""
    reason = not_running_reason(status, now)
    if reason is None:
        return dict(status)
    uncommitted = ("snapshots", "rate", "lag_ms")
    return {
        **{k: v for k, v in status.items() if k not in uncommitted},
        "state": "dead",
        "error": reason,
    }
