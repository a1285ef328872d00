"""The binlog decoder's child process and the pipe its records come through.

Decoding runs in a child process (`binlog_decoder`), in parallel with the pipeline. The
child ignores SIGINT and SIGTERM, even sent to the whole process group (Ctrl-C, Airflow
stopping a task), so it cannot die before the streamer has shut down in order; the
streamer then kills it. A child that dies all the same died on its own: a lost source,
after which the streamer restarts from its committed offset.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.util  # its exit handler must be registered before ours (see below)
import os
import signal
import weakref
from multiprocessing import resource_tracker
from typing import Any

from cdc_core.connectors.mysql import binlog_decoder as dec
from cdc_core.errors import SourceUnavailableError

# Running decoder processes → the pid of the process that started each (not a fork of it).
_decoders: weakref.WeakKeyDictionary[multiprocessing.process.BaseProcess, int] = weakref.WeakKeyDictionary()


@atexit.register
def _kill_decoders() -> None:
    """multiprocessing's exit handler (which runs after this one) stops daemonic children
    with SIGTERM and waits for them: a decoder, which ignores SIGTERM, left running by a
    path that did not close its source would keep the interpreter from exiting."""
    for process, owner in list(_decoders.items()):
        if owner != os.getpid():
            continue
        with contextlib.suppress(Exception):
            process.kill()
            process.join(10)


class SourceConnectionLost(SourceUnavailableError):
    """The connection to the database dropped; the streamer restarts from its offset."""


class DecoderProcess:
    """One decoder child, started on `stream_kwargs` (python-mysql-replication's), and the
    parent's end of its pipe."""

    def __init__(self, stream_kwargs: dict[str, Any], tables: Any, signal_table: Any, name: str) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe(duplex=False)
        self.pipe = parent
        self.process = context.Process(
            target=dec.run, args=(child, stream_kwargs, tables, signal_table), name=name, daemon=True
        )
        # Started with the stop signals blocked (the mask survives fork and exec), so one
        # sent to the process group while it starts up stays pending until `dec.run`
        # ignores it. The resource tracker unblocks them when it starts: start it first.
        resource_tracker.ensure_running()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, dec.STOP_SIGNALS)
        try:
            self.process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _decoders[self.process] = os.getpid()
        child.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def first(self) -> tuple[Any, ...]:
        """The child's first message: it reports once the server accepted the position."""
        try:
            return self.pipe.recv()
        except (EOFError, OSError):
            raise SourceConnectionLost("the binlog decoder process exited before it started") from None

    def receive(self, timeout: float) -> tuple[Any, ...] | None:
        """The next message, or None after `timeout`."""
        try:
            if not self.pipe.poll(timeout):
                return None
            return self.pipe.recv()
        except (EOFError, OSError):
            raise SourceConnectionLost("the binlog decoder process exited unexpectedly") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.pipe.close()
        # It ignores SIGTERM (see the module docstring) and holds no state that matters.
        self.process.kill()
        self.process.join(10)
        _decoders.pop(self.process, None)
