"""One merge per checkpoint at a time."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("spark_jobs.delta_merge")


@contextmanager
def merge_lease(checkpoint: str, wait_seconds: float = 3600) -> Iterator[None]:
    """One merge per checkpoint at a time (a scheduled merge and a snapshot's merge may
    start together): the second waits for the first. A remote checkpoint relies on the
    scheduler running one merge per connector."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        yield
        return
    from cdc_core.pipeline.state import Lease, LeaseError

    path = Path(checkpoint.removeprefix("file:")) / "merge.lock"
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            lease = Lease(path)
            break
        except LeaseError:
            if time.monotonic() > deadline:
                raise
            log.info("another merge holds %s; waiting", path)
            time.sleep(2)
    try:
        yield
    finally:
        lease.release()
